# Sourced by scripts/bench-instructions.sh (through stockd_count of
# scripts/lib/instructions_http.sh): what a reservation costs when its SKU
# requires a pass (contract §20) — signed HS256, then EdDSA — and when the
# hold budget is on (limits.buyer_max_live_units, contract §12), beside the
# same reservation without either, in instructions of the api and of its
# redis-server. The issue's bound: the api's count with an HS256 pass
# ≤ 1.1 x without.
#
# The passes are minted outside the measured window by
# scripts/lib/mint_passes.py (the waiting room's part): a distinct valid pass
# per request, each for its own buyer. The pass runs use the api process of
# the count without (its config names both keys from the start); the budget
# needs its own api process (the setting is the process's), started with
# the budget on against the same redis-server, MariaDB and consumer.

# Key ids of the two pass keys the api is configured with (http_env).
PASS_KID_HS256=instr-hs256
PASS_KID_EDDSA=instr-eddsa
# The SKUs of the runs: passes signed HS256, EdDSA; the budget's.
PASS_SKU_HS256=201
PASS_SKU_EDDSA=202
BUDGET_SKU=203
# limits.buyer_max_live_units of the budget's api: on, and above the one
# unit each buyer holds, so every reservation is a claim that passes.
BUDGET_UNITS=2

# put_sku <sku> <requires_pass true|false>: the SKU with stock for every run;
# then a second for the api's board to hear its terms (a notice on the
# sold-out channel): a board that has not would let a pass through unread.
put_sku() {
    curl -fs -o /dev/null -X PUT -H "Authorization: Bearer $HTTP_TOKEN" \
        -H 'Content-Type: application/json' \
        -d "{\"total_stock\":1000000,\"limit_per_user\":1,\"requires_pass\":$2}" \
        "http://127.0.0.1:$API_PORT/v1/admin/skus/$1"
    sleep 1
}

# measured_window <api pid> <consumer pid> <sku> <tag> [passes]: warm-up
# ($HTTP_WARMUP requests) then $HTTP_REQUESTS measured, the api, the
# consumer and Redis counted over the same requests (until the consumer
# applied them and the acker removed their outbox entries); sets m_api,
# m_consumer, m_redis, m_body.
measured_window() {
    local api=$1 consumer=$2 sku=$3 tag=$4 passes=${5:-}
    local warm="" measured=""
    if [ -n "$passes" ]; then
        head -n "$HTTP_WARMUP" "$passes" >"$OUT/$tag-warm.passes"
        tail -n +"$((HTTP_WARMUP + 1))" "$passes" >"$OUT/$tag-measured.passes"
        warm="$OUT/$tag-warm.passes"
        measured="$OUT/$tag-measured.passes"
    fi
    drive $API_PORT "$HTTP_WARMUP" "${tag}w" "" "$sku" "$warm"
    wait_rows "$HTTP_WARMUP" 600 "$sku"
    count_from "$api"
    count_from "$consumer"
    count_from "$http_redis"
    drive $API_PORT "$HTTP_REQUESTS" "${tag}m" "" "$sku" "$measured"
    wait_rows $((HTTP_WARMUP + HTTP_REQUESTS)) 600 "$sku"
    wait_outbox_empty "$sku" >/dev/null
    m_api=$(count_until "$api" "$HTTP_REQUESTS")
    m_consumer=$(count_until "$consumer" "$HTTP_REQUESTS")
    m_redis=$(count_until "$http_redis" "$HTTP_REQUESTS")
    m_body=$(sed -n 's/.*body_bytes=//p' "$OUT/${tag}m.drive")
}

# mint <hs256|eddsa> <key file> <kid> <sku> <first user>: a pass per request
# of a window (warm-up and measured), each for a buyer of its own.
mint() {
    python3 scripts/lib/mint_passes.py mint "$1" "$2" "$3" "$4" "$5" \
        $((HTTP_WARMUP + HTTP_REQUESTS)) >"$OUT/$1.passes"
}

# pass_counts <api pid> <consumer pid> <the api's environment...>: the pass
# runs on the running api, then the budget run on an api of its own; sets
# hs256_api/_redis/_consumer, eddsa_*, budget_* and budget_api (its pid).
pass_counts() {
    local api=$1 consumer=$2
    shift 2
    echo "bench-instructions: reservations with an HS256 pass, an EdDSA pass, the hold budget" >&2
    put_sku $PASS_SKU_HS256 true
    mint hs256 "$OUT/pass-hs256.secret" $PASS_KID_HS256 $PASS_SKU_HS256 3000000001
    measured_window "$api" "$consumer" $PASS_SKU_HS256 ph "$OUT/hs256.passes"
    hs256_api=$m_api hs256_redis=$m_redis hs256_consumer=$m_consumer hs256_body=$m_body
    put_sku $PASS_SKU_EDDSA true
    mint eddsa "$OUT/pass-ed25519.pem" $PASS_KID_EDDSA $PASS_SKU_EDDSA 3100000001
    measured_window "$api" "$consumer" $PASS_SKU_EDDSA pe "$OUT/eddsa.passes"
    eddsa_api=$m_api eddsa_redis=$m_redis eddsa_consumer=$m_consumer eddsa_body=$m_body
    kill "$api" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$api" 2>/dev/null || break; sleep 0.1; done
    start_stockd api "$@" "STOCKD__LIMITS__BUYER_MAX_LIVE_UNITS=$BUDGET_UNITS"
    budget_api=$started
    wait_http $API_PORT /readyz 300
    put_sku $BUDGET_SKU false
    measured_window "$budget_api" "$consumer" $BUDGET_SKU bu
    budget_api_count=$m_api budget_redis=$m_redis budget_consumer=$m_consumer
}

# print_passes: the table and the three ratios (each against the count
# without, api and Redis).
print_passes() {
    local f='%-62s %12s %12s %8s %8s\n'
    echo
    echo "one reservation with a pass, with the hold budget (callgrind; api and its redis-server)"
    printf "$f" "" "api" "redis" "api" "redis"
    printf "$f" "without a pass, budget off ($api_body-byte answers)" \
        "$api_per_reservation" "$redis_per_http_reservation" "1.00" "1.00"
    printf "$f" "an HS256 pass each ($hs256_body-byte answers)" "$hs256_api" "$hs256_redis" \
        "$(ratio "$hs256_api" "$api_per_reservation")" \
        "$(ratio "$hs256_redis" "$redis_per_http_reservation")"
    printf "$f" "an EdDSA pass each ($eddsa_body-byte answers)" "$eddsa_api" "$eddsa_redis" \
        "$(ratio "$eddsa_api" "$api_per_reservation")" \
        "$(ratio "$eddsa_redis" "$redis_per_http_reservation")"
    printf "$f" "hold budget on (limits.buyer_max_live_units $BUDGET_UNITS)" \
        "$budget_api_count" "$budget_redis" \
        "$(ratio "$budget_api_count" "$api_per_reservation")" \
        "$(ratio "$budget_redis" "$redis_per_http_reservation")"
}

# print_pass_ratios: the lines a script reads (before the final two).
print_pass_ratios() {
    echo "api per reservation with an HS256 pass / without: $(ratio "$hs256_api" "$api_per_reservation")"
    echo "api per reservation with an EdDSA pass / without: $(ratio "$eddsa_api" "$api_per_reservation")"
    echo "api per reservation with the hold budget / without: $(ratio "$budget_api_count" "$api_per_reservation")"
    echo "redis per reservation with the hold budget / without: $(ratio "$budget_redis" "$redis_per_http_reservation")"
}

# passes_json <json file>: adds the counts as "passes" (the other keys stay).
passes_json() {
    PASS_COUNTS_TEXT="http_requests=$HTTP_REQUESTS budget_units=$BUDGET_UNITS \
api=$api_per_reservation redis=$redis_per_http_reservation consumer=$consumer_per_reservation \
hs256_api=$hs256_api hs256_redis=$hs256_redis hs256_consumer=$hs256_consumer \
eddsa_api=$eddsa_api eddsa_redis=$eddsa_redis eddsa_consumer=$eddsa_consumer \
budget_api=$budget_api_count budget_redis=$budget_redis budget_consumer=$budget_consumer" \
        python3 - "$1" <<'PY'
import json, os, sys
path = sys.argv[1]
c = {k: int(v) for k, v in (kv.split("=") for kv in os.environ["PASS_COUNTS_TEXT"].split())}
for what in ("hs256", "eddsa", "budget"):
    c[f"{what}_api_over_without"] = round(c[f"{what}_api"] / c["api"], 2)
    c[f"{what}_redis_over_without"] = round(c[f"{what}_redis"] / c["redis"], 2)
c["hs256_goal"] = 1.1
c["kernel_counted"] = False
with open(path) as f:
    doc = json.load(f)
doc["passes"] = c
with open(path, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
PY
}
