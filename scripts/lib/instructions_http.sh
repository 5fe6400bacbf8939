# Sourced by scripts/bench-instructions.sh: the HTTP side of a reservation in
# instructions, stockd's api and consumer roles beside the actix-web floor
# (examples/actix_floor.rs), each under callgrind and driven by the same
# client (scripts/lib/http_driver.py: $HTTP_REQUESTS one-unit reservations
# of one SKU, a new buyer each, over $HTTP_CONNECTIONS keep-alive
# connections). Kernel work (system calls, the network stack) is not counted:
# callgrind sees user space only.
#
# Needs from the caller: $OUT, the pids array, start_under_callgrind,
# scripts/lib/callgrind.sh, and the release builds of stockd and the example.
#
# stockd runs against a private plain redis-server (port $HTTP_REDIS_PORT,
# itself under callgrind: Redis's instructions per reservation beside the
# api's) and the shared MariaDB and RabbitMQ under names of its own (database
# stockd_t_instr<pid>, queues and exchanges t_instr<pid>.*: the t_ names
# scripts/clean-test-data.sh removes if a run is killed before its own
# cleanup, http_cleanup).

HTTP_REQUESTS=${HTTP_REQUESTS:-2000}
HTTP_CONNECTIONS=${HTTP_CONNECTIONS:-16}
# Unmeasured requests first: connections, pools, the SKU's cached layout and
# the allocator's arenas warm, so the count is a steady state.
HTTP_WARMUP=${HTTP_WARMUP:-400}
FLOOR_PORT=${FLOOR_PORT:-18079}
API_PORT=${API_PORT:-18078}
CONSUMER_METRICS_PORT=${CONSUMER_METRICS_PORT:-18077}
HTTP_REDIS_PORT=${HTTP_REDIS_PORT:-16398}
HTTP_SKU=200
HTTP_NAME="t_instr$$"
HTTP_DB="stockd_$HTTP_NAME"
HTTP_TOKEN="instr-$$-admin"
DRIVE="python3 scripts/lib/http_driver.py"
SQL_SHARED="mariadb -uroot -h127.0.0.1 -P3306"

# wait_http <port> <path> <seconds>: until the path answers 200 (valgrind
# starts a Rust binary in seconds, not milliseconds).
wait_http() {
    for _ in $(seq $(($3 * 5))); do
        curl -fs -o /dev/null "http://127.0.0.1:$1$2" && return 0
        sleep 0.2
    done
    echo "bench-instructions: 127.0.0.1:$1$2 not ready within $3 s" >&2
    return 1
}

# drive <port> <requests> <tag> <token> [sku] [passes]: the fixed client
# (on $HTTP_SKU unless told; with a file of passes, each request carries
# one); its summary line goes to $OUT/<tag>.drive, and a run with any answer
# not 201 stops the script.
drive() {
    if ! $DRIVE "127.0.0.1:$1" "${5:-$HTTP_SKU}" "$2" "$HTTP_CONNECTIONS" "$3" "$4" "${6:-}" \
        >"$OUT/$3.drive"; then
        echo "bench-instructions: $3: not every answer was 201: $(cat "$OUT/$3.drive")" >&2
        return 1
    fi
}

# floor_count: instructions per request of the actix floor; sets floor_body.
floor_count() {
    start_under_callgrind floor target/release/examples/actix_floor "127.0.0.1:$FLOOR_PORT"
    local pid=$started
    # Any answer means it is up (a GET of the POST route is 404).
    for _ in $(seq 300); do
        curl -s -o /dev/null "http://127.0.0.1:$FLOOR_PORT/" && break
        sleep 0.2
    done
    drive $FLOOR_PORT "$HTTP_WARMUP" fw ""
    count_from "$pid"
    drive $FLOOR_PORT "$HTTP_REQUESTS" fm ""
    floor_per_request=$(count_until "$pid" "$HTTP_REQUESTS")
    floor_body=$(sed -n 's/.*body_bytes=//p' "$OUT/fm.drive")
    kill "$pid" 2>/dev/null || true
}

# The environment of both stockd roles: this run's names, durability queue,
# and operation bounds raised for a child that runs ~50x slower under
# valgrind (a confirm or a query past the normal bound would change the path
# measured: a 202 and the relay's republish instead of a 201). The relay's
# retry age stays below reconcile.stuck_after_ms (60 s), which must exceed it.
http_env() {
    cat <<ENV
STOCKD_ENV=local
STOCKD__HTTP__BIND=127.0.0.1:$API_PORT
STOCKD__METRICS__BIND=127.0.0.1:$CONSUMER_METRICS_PORT
STOCKD__MYSQL__URL=mysql://root@127.0.0.1:3306/$HTTP_DB
STOCKD__MYSQL__CONNECT_TIMEOUT_SECS=60
STOCKD__MYSQL__QUERY_TIMEOUT_MS=120000
STOCKD__REDIS__URL=redis://127.0.0.1:$HTTP_REDIS_PORT
STOCKD__REDIS__KEY_PREFIX=$HTTP_NAME:
STOCKD__REDIS__COMMAND_TIMEOUT_MS=60000
STOCKD__REDIS__CONNECT_TIMEOUT_MS=60000
STOCKD__AMQP__QUEUE_PREFIX=$HTTP_NAME.
STOCKD__AMQP__PUBLISH_TIMEOUT_MS=120000
STOCKD__RELAY__IDLE_MS=50000
STOCKD__RESERVATION__DURABILITY=queue
STOCKD__ADMIN__TOKEN=$HTTP_TOKEN
STOCKD__LOGGING__LEVEL=warn
STOCKD__PASSES__KEYS=[{id: $PASS_KID_HS256, hs256_secret_file: "$OUT/pass-hs256.secret"}, {id: $PASS_KID_EDDSA, ed25519_public_key_file: "$OUT/pass-ed25519.pub.pem"}]
ENV
}

# ledger_rows [sku]: reservations of the SKU ($HTTP_SKU) in this run's ledger.
ledger_rows() {
    $SQL_SHARED -N "$HTTP_DB" -e \
        "SELECT COUNT(*) FROM stock_deduct_idempotent WHERE sku_id = ${1:-$HTTP_SKU}" 2>/dev/null || echo 0
}

# wait_rows <n> <seconds> [sku]: until the consumer has applied n
# reservations of the SKU.
wait_rows() {
    for _ in $(seq $(($2 * 5))); do
        [ "$(ledger_rows "${3:-}")" -ge "$1" ] && return 0
        sleep 0.2
    done
    echo "bench-instructions: the ledger holds $(ledger_rows "${3:-}") of $1 reservations after $2 s" >&2
    return 1
}

# wait_outbox_empty [sku]: until the acker has removed the SKU's confirmed
# outbox entries (its XDELs belong to the reservations counted).
wait_outbox_empty() {
    local outbox="$HTTP_NAME:{${1:-$HTTP_SKU}}:outbox"
    for _ in $(seq 600); do
        [ "$(redis-cli -p "$HTTP_REDIS_PORT" XLEN "$outbox")" = 0 ] && break
        sleep 0.1
    done
    redis-cli -p "$HTTP_REDIS_PORT" XLEN "$outbox"
}

# start_stockd <role> <NAME=value...>: `stockd --role <role>` under callgrind
# with that environment (env before valgrind: valgrind does not follow an
# exec, so `valgrind env ... stockd` would count env, not stockd); sets
# $started.
start_stockd() {
    local role=$1
    shift
    env "$@" valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$OUT/cg.%p.out" target/release/stockd --role "$role" \
        >"$OUT/$role.log" 2>&1 &
    started=$!
    pids+=("$started")
}

# stockd_count: instructions per reservation of `stockd --role api` (relay
# and acker included), of `stockd --role consumer` (per deduction applied)
# and of their redis-server, over the same requests; sets
# api_per_reservation, consumer_per_reservation, redis_per_http_reservation,
# api_body, and writes the api's top functions to $OUT/api-top.txt. Then,
# unless PASS_COUNTS=0, the same with passes and with the hold budget
# (scripts/lib/instructions_passes.sh).
stockd_count() {
    budget_api=""
    start_under_callgrind http-redis redis-server --port "$HTTP_REDIS_PORT" --bind 127.0.0.1 \
        --save "" --appendonly no --dir "$OUT"
    http_redis=$started
    python3 scripts/lib/mint_passes.py keys "$OUT"
    local env
    mapfile -t env < <(http_env)
    for _ in $(seq 50); do redis-cli -p "$HTTP_REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    env "${env[@]}" target/release/stockd migrate >"$OUT/migrate.log" 2>&1
    start_stockd api "${env[@]}"
    local api=$started
    start_stockd consumer "${env[@]}"
    local consumer=$started
    wait_http $API_PORT /readyz 300
    wait_http $CONSUMER_METRICS_PORT /readyz 300
    curl -fs -o /dev/null -X PUT -H "Authorization: Bearer $HTTP_TOKEN" \
        -H 'Content-Type: application/json' -d '{"total_stock":1000000,"limit_per_user":1}' \
        "http://127.0.0.1:$API_PORT/v1/admin/skus/$HTTP_SKU"
    drive $API_PORT "$HTTP_WARMUP" sw ""
    wait_rows "$HTTP_WARMUP" 600
    count_from "$api"
    count_from "$consumer"
    count_from "$http_redis"
    drive $API_PORT "$HTTP_REQUESTS" sm ""
    wait_rows $((HTTP_WARMUP + HTTP_REQUESTS)) 600
    # The acker's XDELs of the last confirmed entries, then the windows close.
    api_outbox_left=$(wait_outbox_empty)
    api_per_reservation=$(count_until "$api" "$HTTP_REQUESTS")
    callgrind_annotate --inclusive=yes "$(last_dump "$api")" >"$OUT/api-annotate.txt" 2>/dev/null || true
    consumer_per_reservation=$(count_until "$consumer" "$HTTP_REQUESTS")
    redis_per_http_reservation=$(count_until "$http_redis" "$HTTP_REQUESTS")
    api_body=$(sed -n 's/.*body_bytes=//p' "$OUT/sm.drive")
    if [ "${PASS_COUNTS:-1}" != 0 ]; then
        pass_counts "$api" "$consumer" "${env[@]}"
    fi
    kill "$api" "$consumer" "$budget_api" "$http_redis" 2>/dev/null || true
}

# top_functions <annotate output> <n>: the n dearest functions, inclusive.
top_functions() {
    awk -v n="$2" '/file:function/ { head = 1; next }
        head && /^-+$/ { body = 1; next }
        body && NF { print; if (++shown == n) exit }' "$1"
}

# http_cleanup: this run's database, queues and exchanges on the shared
# services (the private redis-server goes with the pids).
http_cleanup() {
    $SQL_SHARED -e "DROP DATABASE IF EXISTS \`$HTTP_DB\`" 2>/dev/null || true
    local q
    for q in $(timeout 60 rabbitmqctl -q list_queues --no-table-headers name 2>/dev/null |
        grep "^$HTTP_NAME\." || true); do
        timeout 60 rabbitmqctl -q delete_queue "$q" >/dev/null 2>&1 || true
    done
    timeout 60 rabbitmqctl -q eval '
        lists:foldl(fun(X, N) ->
            R = element(2, X),
            case binary:match(element(4, R), <<"'"$HTTP_NAME"'.">>) of
                {0, _} -> rabbit_exchange:delete(R, false, <<"bench-instructions">>), N + 1;
                _ -> N
            end
        end, 0, rabbit_exchange:list(<<"/">>)).' >/dev/null 2>&1 || true
}
