# Sourced by scripts/bench-instructions.sh once every count is in: what one
# reservation of a hot SKU costs, beside its two anchors (the seed's one-call
# script in Redis, the actix-web floor over HTTP), printed and added to the
# JSON. Reads the counts the script and scripts/lib/instructions_http.sh set.

# print_hot_sku: the table; sets redis_hot, redis_quiet_total and top_file
# (the api's dearest functions, kept beside $JSON_OUT).
print_hot_sku() {
    redis_hot=$((redis_single + redis_xdel))
    redis_quiet_total=$((redis_quiet + redis_xdel_quiet))
    top_file="$(dirname "$JSON_OUT")/instructions-api-top20.txt"
    mkdir -p "$(dirname "$JSON_OUT")"
    top_functions "$OUT/api-annotate.txt" 20 >"$top_file"
    local f='%-62s %12s %8s\n'
    echo
    echo "one reservation of a hot SKU (callgrind: user space only, kernel work not counted)"
    printf "$f" "" "instr." "ratio"
    printf "$f" "Redis: the seed's script, one call each (the anchor)" "$redis_seed" "1.00"
    printf "$f" "Redis: reserve.lua, calls of $PER_CALL" "$redis_single" ""
    printf "$f" "Redis: the acker's XDEL, $ACK_IDS call's entry each" "$redis_xdel" ""
    printf "$f" "Redis: per reservation, calls of $PER_CALL (reserve.lua + XDEL)" "$redis_hot" \
        "$(ratio "$redis_hot" "$redis_seed")"
    printf "$f" "Redis: reserve.lua, calls of 1 (a quiet SKU)" "$redis_quiet" ""
    printf "$f" "Redis: the acker's XDEL, 1 entry each" "$redis_xdel_quiet" ""
    printf "$f" "Redis: per reservation, calls of 1 (reserve.lua + XDEL)" "$redis_quiet_total" \
        "$(ratio "$redis_quiet_total" "$redis_seed")"
    echo "HTTP: $HTTP_REQUESTS reservations of one SKU, a buyer each, $HTTP_CONNECTIONS keep-alive connections"
    printf "$f" "the actix-web floor, per request ($floor_body-byte answers)" "$floor_per_request" "1.00"
    printf "$f" "stockd --role api, relay and acker included ($api_body-byte answers)" \
        "$api_per_reservation" "$(ratio "$api_per_reservation" "$floor_per_request")"
    printf "$f" "stockd --role consumer, per deduction applied" "$consumer_per_reservation" \
        "$(ratio "$consumer_per_reservation" "$floor_per_request")"
    if [ "$api_outbox_left" != 0 ]; then
        echo "(the api's outbox still held $api_outbox_left entries when its count ended)"
    fi
    echo "the api's 20 dearest functions, inclusive ($top_file):"
    cat "$top_file"
}

# hot_sku_json <json file> <top file>: adds the counts as "hot_sku" (the
# other keys stay as they are).
hot_sku_json() {
    HOT_SKU_COUNTS="seed_call=$redis_seed anchor_calls=$ANCHOR_CALLS per_call=$PER_CALL \
ack_ids=$ACK_IDS reserve_batch=$redis_single xdel_batch=$redis_xdel redis_batch=$redis_hot \
reserve_quiet=$redis_quiet xdel_quiet=$redis_xdel_quiet redis_quiet=$redis_quiet_total \
http_requests=$HTTP_REQUESTS http_connections=$HTTP_CONNECTIONS \
actix_floor=$floor_per_request api=$api_per_reservation consumer=$consumer_per_reservation" \
        python3 - "$1" "$2" <<'PY'
import json, os, sys
path, top = sys.argv[1], sys.argv[2]
counts = {k: int(v) for k, v in (kv.split("=") for kv in os.environ["HOT_SKU_COUNTS"].split())}
counts["redis_batch_over_seed"] = round(counts["redis_batch"] / counts["seed_call"], 2)
counts["redis_quiet_over_seed"] = round(counts["redis_quiet"] / counts["seed_call"], 2)
counts["api_over_floor"] = round(counts["api"] / counts["actix_floor"], 2)
counts["consumer_over_floor"] = round(counts["consumer"] / counts["actix_floor"], 2)
counts["kernel_counted"] = False
counts["api_top20_inclusive"] = [line.rstrip("\n") for line in open(top)]
with open(path) as f:
    doc = json.load(f)
doc["hot_sku"] = counts
with open(path, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
PY
}
