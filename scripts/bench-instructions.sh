#!/usr/bin/env bash
# What one 3-line order and one reservation ask of Redis and of MariaDB, in
# instructions (docs/benchmarks-history.md, "Orders"): callgrind counts instructions, not
# seconds, so two runs of the same code read the same on a VM whose speed
# drifts by half between minutes, where CPU time per event cannot tell a
# 5 % change from noise.
#
# Starts a private redis-server and a private mariadbd under
# `valgrind --tool=callgrind` (loopback ports 16399 and 13399, data under
# $OUT), feeds each the text of scripts/lib/instructions_workload.py with
# instrumentation on only around the measured calls, prints instructions per
# event, and removes both servers (by pid) and their data, even on failure.
# RPORT and MPORT move the ports; a taken port stops the run before it starts.
# Redis: order.lua and reserve.lua of this checkout (src/redis/lua, with the
# helpers of src/redis/lua/lib joined in as stockd joins them: examples/lua_text.rs), in
# calls of $PER_CALL (the acker's XDEL not included). MariaDB: the
# consumer's statements for $ORDERS orders (transactions of 160) in the
# `current` shape and the `lookups` shape before 2026-12-05, and for
# $SINGLES reservations (transactions of 500), over this checkout's schema.
# Per release of an expired reservation (the closer's batch): Redis,
# finish.lua in calls of each of $RELEASE_CALL_SIZES ids (what a storm's
# batch gives: finish.rs' FINISH_CHUNK is 200), over $RELEASES reservations
# reserve.lua made first (not counted); MariaDB, the statements of
# lifecycle::expire_many for batches of each of $RELEASE_TX_SIZES rows
# (the closer's EXPIRE_CHUNK is 500) with the outbox insert of their events
# (events on, the default), and at the largest size without it, over the
# $SINGLES rows the consumer's statements made (not counted).
# One reservation of a hot SKU beside its anchors
# (BENCHMARKS.md, "How to read the instruction counts"): in Redis, the seed's one-call script
# (scripts/lib/seed-anchor.lua, $ANCHOR_CALLS calls, each its own round
# trip) against reserve.lua in calls of $PER_CALL and of 1 plus the acker's
# XDEL of the call's one outbox entry ($ACK_IDS and 1 entries per XDEL); over HTTP, the
# actix-web floor (examples/actix_floor.rs) against `stockd --role api`
# (durability queue, relay and acker in the process) and `--role consumer`,
# under callgrind, driven by the same client (scripts/lib/instructions_http.sh:
# a private redis-server and names of their own on the shared MariaDB and
# RabbitMQ, removed at the end). Kernel work is not counted.
# A reservation with a pass and with the hold budget (contract §20, §12;
# scripts/lib/instructions_passes.sh): the same api and its redis-server
# counted over requests that each carry a distinct valid pass, signed HS256
# and then EdDSA (minted beforehand by scripts/lib/mint_passes.py), and over
# an api with limits.buyer_max_live_units on; each beside the count without,
# printed as `api per reservation with an HS256 pass / without: <r>` (the
# issue's bound: 1.1), the EdDSA and the budget's (api and Redis) ratios.
# The output ends with the two judged ratios of a hot SKU,
# `redis per reservation / seed call: <r>` and
# `stockd per reservation / actix floor: <r>`.
# The shared services are touched only under those names. Takes about ten minutes.
#
# While iterating: PASS_COUNTS=0 skips the pass and budget runs (their rows
# and ratios are then absent); HTTP_ONLY=1 skips the private redis-server's
# and mariadbd's script and statement counts and writes no JSON (it prints
# the HTTP counts and the pass and budget ratios only); KEEP_DUMPS=<dir>
# keeps each window's callgrind dump there (scripts/lib/callgrind.sh), to
# read where the instructions went with callgrind_annotate.
#
# Also writes the counts as JSON to $JSON_OUT (default
# bench-out/instructions.json), which `stockd-bench report` (the last step of
# `make bench`) puts into BENCHMARKS.md beside the run's bench.json.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d /tmp/stockd-instructions.XXXXXX)}
JSON_OUT=${JSON_OUT:-bench-out/instructions.json}
PER_CALL=${PER_CALL:-16}
CALLS=${CALLS:-200}
ORDERS=${ORDERS:-3200}
SINGLES=${SINGLES:-3000}
RELEASES=${RELEASES:-3200}
RELEASE_CALL_SIZES=${RELEASE_CALL_SIZES:-16 64 200}
RELEASE_TX_SIZES=${RELEASE_TX_SIZES:-16 64 500}
# The anchor's calls (the seed's script) and reserve.lua's calls of 1.
ANCHOR_CALLS=${ANCHOR_CALLS:-2000}
# Entries per XDEL beside calls of $PER_CALL: a call's reservations share one
# outbox entry (reserve.lua), removed once all are confirmed; the acker
# (src/outbox/acker.rs) removes what was confirmed within 10 ms
# (ACK_LINGER), up to 1,000 entries, in one XDEL per stream. One entry per
# XDEL, the least batching it does, is the default: an XDEL per call.
ACK_IDS=${ACK_IDS:-1}
# Private ports, overridable: two checkouts measuring at once must not share
# a server (a second run on the same ports fed its statements to the first's
# mariadbd and counted its redis-server's instructions).
RPORT=${RPORT:-16399}
MPORT=${MPORT:-13399}
. scripts/lib/callgrind.sh
. scripts/lib/instructions_http.sh
. scripts/lib/instructions_passes.sh
for port in $RPORT $MPORT $FLOOR_PORT $API_PORT $CONSUMER_METRICS_PORT $HTTP_REDIS_PORT; do
    if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
        echo "bench-instructions: 127.0.0.1:$port is taken (another run?); set RPORT/MPORT (or FLOOR_PORT, API_PORT, CONSUMER_METRICS_PORT, HTTP_REDIS_PORT)" >&2
        rmdir "$OUT" 2>/dev/null || true
        exit 1
    fi
done
W="python3 scripts/lib/instructions_workload.py"

if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
    APT_TAG=bench-instructions
    . scripts/lib/apt.sh
    apt_lock
    command -v valgrind >/dev/null || apt_install valgrind
fi

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    http_cleanup
    rm -rf "$OUT"
}
trap cleanup EXIT


start_under_callgrind() { # name, then the server's command line; sets $started
    valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$OUT/cg.%p.out" "${@:2}" >"$OUT/$1.log" 2>&1 &
    started=$!
    pids+=("$started")
}

mkdir -p "$OUT/lua"
# The scripts as Redis runs them (src/redis/scripts.rs joins the shared
# helpers of src/redis/lua/lib into each): printed by examples/lua_text.rs,
# a release build as `make bench` makes.
for script in order reserve finish; do
    cargo run -q --release -p stockd --example lua_text -- "$script" >"$OUT/lua/$script.lua"
done
# stockd and the actix floor for the HTTP counts (scripts/lib/instructions_http.sh).
cargo build -q --release -p stockd --bin stockd --example actix_floor
if [ "${HTTP_ONLY:-0}" = 1 ]; then
    echo "bench-instructions: HTTP_ONLY=1: the actix floor and stockd only, no JSON" >&2
    floor_count
    stockd_count
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
    echo "actix floor $floor_per_request, api $api_per_reservation, consumer $consumer_per_reservation, redis $redis_per_http_reservation per reservation"
    if [ "${PASS_COUNTS:-1}" != 0 ]; then
        print_passes
        print_pass_ratios
    fi
    exit 0
fi
echo "bench-instructions: private redis-server :$RPORT and mariadbd :$MPORT under callgrind, in $OUT" >&2
start_under_callgrind redis redis-server --port $RPORT --bind 127.0.0.1 --save "" \
    --appendonly no --dir "$OUT"
rpid=$started
mariadb-install-db --no-defaults --datadir="$OUT/mysql" \
    --auth-root-authentication-method=normal >"$OUT/install.log" 2>&1
start_under_callgrind mariadb /usr/sbin/mariadbd --no-defaults --datadir="$OUT/mysql" \
    --port=$MPORT --socket="$OUT/mysql.sock" --bind-address=127.0.0.1 --user=root \
    --skip-log-bin --innodb-buffer-pool-size=256M --innodb-buffer-pool-size-max=256M \
    --innodb-use-native-aio=0
mpid=$started
R="redis-cli -p $RPORT"
M="mariadb -uroot -h127.0.0.1 -P$MPORT"
for _ in $(seq 300); do
    $R ping >/dev/null 2>&1 && $M -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.2
done
$M -e 'SELECT 1' >/dev/null

# Redis: each script in calls of <per call>, after 20 unmeasured calls;
# redis-cli sends each call after the answer to the one before (a round trip
# each, not pipelined).
redis_run() { # kind script [per call] [calls]
    local per=${3:-$PER_CALL} calls=${4:-$CALLS}
    $R FLUSHALL >/dev/null
    $W redis-setup | $R >/dev/null
    local sha
    sha=$($R SCRIPT LOAD "$(cat "$2")")
    $W "redis-$1" 20 "$per" | sed "s/ SHA / $sha /" | $R >"$OUT/redis-$1-warm.txt"
    # A count of calls that were refused or failed is the count of the wrong
    # work: every warm-up answer must be a hold (the measured calls are alike).
    if grep -qE '^(ERROR|ERR .*|MISMATCH|TAKEN|REFUSED|NOT_LOADED|RATE_LIMITED|BACKPRESSURE|BUSY)$' \
        "$OUT/redis-$1-warm.txt"; then
        echo "bench-instructions: $1: warm-up calls did not hold (arguments out of step with the script?); see $OUT/redis-$1-warm.txt" >&2
        exit 1
    fi
    $W "redis-$1" "$calls" "$per" 100000 | sed "s/ SHA / $sha /" >"$OUT/redis-$1.txt"
    instructions "$rpid" $((calls * per)) sh -c "$R <'$OUT/redis-$1.txt'"
}
redis_order=$(redis_run order "$OUT/lua/order.lua")
redis_single=$(redis_run reserve "$OUT/lua/reserve.lua")

# The acker's XDEL of the entries the last reserve run left in the outbox,
# <ids per XDEL> a command (unmeasured: reading the ids), per reservation the
# entries carried (each call's reservations share its one entry; the 20
# warm-up calls' too).
redis_xdel_run() { # ids per XDEL, reservations per call
    $R XRANGE 'p:{200}:outbox' - + | grep -E '^[0-9]+-[0-9]+$' >"$OUT/outbox-ids.txt"
    local ids
    ids=$(wc -l <"$OUT/outbox-ids.txt")
    $W redis-xdel "$1" <"$OUT/outbox-ids.txt" >"$OUT/redis-xdel.txt"
    instructions "$rpid" $((ids * $2)) sh -c "$R <'$OUT/redis-xdel.txt'"
}
redis_xdel=$(redis_xdel_run "$ACK_IDS" "$PER_CALL")
# A quiet SKU: one reservation per call, one entry per XDEL.
redis_quiet=$(redis_run reserve "$OUT/lua/reserve.lua" 1 "$ANCHOR_CALLS")
redis_xdel_quiet=$(redis_xdel_run 1 1)

# The anchor: the seed's one-call script (scripts/lib/seed-anchor.lua), one
# reservation per call, each its own round trip, a new buyer each.
seed_run() {
    $R FLUSHALL >/dev/null
    $W redis-seed setup | $R >/dev/null
    local sha
    sha=$($R SCRIPT LOAD "$(cat scripts/lib/seed-anchor.lua)")
    $W redis-seed 20 | sed "s/ SHA / $sha /;s/:limit:/:warm:/" | $R >/dev/null
    $W redis-seed "$ANCHOR_CALLS" | sed "s/ SHA / $sha /" >"$OUT/redis-seed.txt"
    instructions "$rpid" "$ANCHOR_CALLS" sh -c "$R <'$OUT/redis-seed.txt'"
    local taken
    taken=$($R GET 'seed:{200}:stock')
    if [ "$taken" != $((1000000000 - 20 - ANCHOR_CALLS)) ]; then
        echo "bench-instructions: the seed's script left stock $taken; it did not take each unit" >&2
        exit 1
    fi
}
redis_seed=$(seed_run)

# Redis per release: reserve.lua makes the reservations (not counted), then
# finish.lua releases 20 calls' worth unmeasured and $RELEASES measured; the
# last one must read RELEASED, or the workload did not do what it says.
redis_release_run() { # ids per call
    local per=$1 warm=$((20 * $1))
    $R FLUSHALL >/dev/null
    $W redis-setup | $R >/dev/null
    local reserve finish
    reserve=$($R SCRIPT LOAD "$(cat "$OUT/lua/reserve.lua")")
    finish=$($R SCRIPT LOAD "$(cat "$OUT/lua/finish.lua")")
    $W redis-reserve $(((warm + RELEASES) / 16)) 16 | sed "s/ SHA / $reserve /" | $R >/dev/null
    $W redis-finish 20 "$per" 0 | sed "s/ SHA / $finish /" | $R >/dev/null
    $W redis-finish $((RELEASES / per)) "$per" "$warm" | sed "s/ SHA / $finish /" \
        >"$OUT/redis-finish.txt"
    instructions "$rpid" $((RELEASES / per * per)) sh -c "$R <'$OUT/redis-finish.txt'"
    local last status
    last=$(printf 'r-%08d' $((warm + RELEASES / per * per)))
    status=$($R HGET "p:{200}:res:$last" status)
    if [ "$status" != RELEASED ]; then
        echo "bench-instructions: finish.lua left $last $status, not RELEASED" >&2
        exit 1
    fi
}
redis_release=()
for per in $RELEASE_CALL_SIZES; do
    redis_release+=("$per:$(redis_release_run "$per")")
done

# MariaDB: a fresh database with this checkout's schema per workload.
sql_run() { # events, then the workload's arguments
    local events=$1
    shift
    $M -e 'DROP DATABASE IF EXISTS bench; CREATE DATABASE bench'
    for f in sql/*.sql; do $M bench <"$f"; done
    $W sql-setup | $M bench
    $W "$@" >"$OUT/sql.txt"
    instructions "$mpid" "$events" sh -c "$M bench <'$OUT/sql.txt'"
}
sql_order=$(sql_run "$ORDERS" sql-orders "$ORDERS" current)
sql_order_before=$(sql_run "$ORDERS" sql-orders "$ORDERS" lookups)
sql_single=$(sql_run "$SINGLES" sql-singles "$SINGLES")

# MariaDB per release: the consumer's statements make $SINGLES RESERVED rows
# (not counted), then the closer's batches release them all.
sql_release_run() { # rows per batch, events (1/0)
    $M -e 'DROP DATABASE IF EXISTS bench; CREATE DATABASE bench'
    for f in sql/*.sql; do $M bench <"$f"; done
    $W sql-setup | $M bench
    $W sql-singles "$SINGLES" | $M bench >/dev/null
    $W sql-expire "$SINGLES" "$1" "$2" >"$OUT/sql.txt"
    instructions "$mpid" "$SINGLES" sh -c "$M bench <'$OUT/sql.txt'"
    local left
    left=$($M -N bench -e "SELECT COUNT(*) FROM stock_deduct_idempotent WHERE status = 'RESERVED'")
    if [ "$left" != 0 ]; then
        echo "bench-instructions: $left rows still RESERVED after the expiry batches" >&2
        exit 1
    fi
}
sql_release=()
largest=0
for per in $RELEASE_TX_SIZES; do
    sql_release+=("$per:$(sql_release_run "$per" 1)")
    [ "$per" -gt "$largest" ] && largest=$per
done
sql_release_quiet=$(sql_release_run "$largest" 0)

# HTTP: the actix floor, then stockd's api and consumer, over the same requests.
# (the servers above are done: their CPU is the children's now)
kill "$rpid" "$mpid" 2>/dev/null || true
echo "bench-instructions: the actix floor and stockd's api and consumer under callgrind" >&2
floor_count
stockd_count

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo
echo "instructions per event (callgrind; Redis in calls of $PER_CALL)"
printf '%-46s %12s %12s %8s\n' "" "per order" "per reserv." "ratio"
printf '%-46s %12s %12s %8s\n' "Redis: order.lua / reserve.lua" "$redis_order" "$redis_single" \
    "$(ratio "$redis_order" "$redis_single")"
printf '%-46s %12s %12s %8s\n' "MariaDB: the consumer's statements" "$sql_order" "$sql_single" \
    "$(ratio "$sql_order" "$sql_single")"
printf '%-46s %12s %12s %8s\n' "MariaDB: orders in the shape before 2026-12-05" "$sql_order_before" \
    "$sql_single" "$(ratio "$sql_order_before" "$sql_single")"
echo
printf '%-46s %12s %12s %8s\n' "" "per release" "per reserv." "ratio"
for entry in "${redis_release[@]}"; do
    printf '%-46s %12s %12s %8s\n' "Redis: finish.lua, ${entry%%:*} ids per call" "${entry#*:}" \
        "$redis_single" "$(ratio "${entry#*:}" "$redis_single")"
done
for entry in "${sql_release[@]}"; do
    printf '%-46s %12s %12s %8s\n' "MariaDB: expiry batch of ${entry%%:*}, events on" "${entry#*:}" \
        "$sql_single" "$(ratio "${entry#*:}" "$sql_single")"
done
printf '%-46s %12s %12s %8s\n' "MariaDB: expiry batch of $largest, events off" "$sql_release_quiet" \
    "$sql_single" "$(ratio "$sql_release_quiet" "$sql_single")"

. scripts/lib/instructions_hot_sku.sh
print_hot_sku
if [ "${PASS_COUNTS:-1}" != 0 ]; then
    print_passes
fi

# The same counts for `stockd-bench report`: the checkout's commit ("-dirty"
# when tracked files differ from it), the servers' versions and the settings.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
redis_version=$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
mariadb_version=$(/usr/sbin/mariadbd --version | sed -n 's/.*Ver \([^ ]*\).*/\1/p')
row() { # key what per_order per_reservation
    printf '    {"key": "%s", "what": "%s", "per_order": %s, "per_reservation": %s}' "$@"
}
release_row() { # key what batch per_release per_reservation
    printf '    {"key": "%s", "what": "%s", "batch": %s, "per_release": %s, "per_reservation": %s}' "$@"
}
mkdir -p "$(dirname "$JSON_OUT")"
{
    echo "{"
    echo "  \"generated_at\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
    echo "  \"commit\": \"$commit\","
    echo "  \"redis\": \"$redis_version\","
    echo "  \"mariadb\": \"$mariadb_version\","
    echo "  \"redis_events_per_call\": $PER_CALL,"
    echo "  \"orders\": $ORDERS,"
    echo "  \"reservations\": $SINGLES,"
    echo "  \"releases\": $RELEASES,"
    echo "  \"rows\": ["
    row redis_scripts "Redis: order.lua / reserve.lua" "$redis_order" "$redis_single"
    echo ","
    row mariadb_statements "MariaDB: the consumer's statements" "$sql_order" "$sql_single"
    echo ","
    row mariadb_statements_lookups "MariaDB: orders with the orders rows and lines looked up first (the earlier shape)" \
        "$sql_order_before" "$sql_single"
    echo
    echo "  ],"
    echo "  \"release_rows\": ["
    sep=""
    for entry in "${redis_release[@]}"; do
        printf '%s' "$sep"
        release_row "redis_finish_${entry%%:*}" "Redis: finish.lua, ${entry%%:*} expiries per call / reserve.lua" \
            "${entry%%:*}" "${entry#*:}" "$redis_single"
        sep=$',\n'
    done
    for entry in "${sql_release[@]}"; do
        printf '%s' "$sep"
        release_row "mariadb_expire_${entry%%:*}" "MariaDB: the closer's expiry batch of ${entry%%:*}, events on / the consumer's statements" \
            "${entry%%:*}" "${entry#*:}" "$sql_single"
    done
    printf '%s' "$sep"
    release_row "mariadb_expire_${largest}_events_off" "MariaDB: the closer's expiry batch of $largest, events off / the consumer's statements" \
        "$largest" "$sql_release_quiet" "$sql_single"
    echo
    echo "  ]"
    echo "}"
} >"$JSON_OUT.tmp"
python3 -m json.tool "$JSON_OUT.tmp" >/dev/null
hot_sku_json "$JSON_OUT.tmp" "$top_file"
if [ "${PASS_COUNTS:-1}" != 0 ]; then
    passes_json "$JSON_OUT.tmp"
fi
mv "$JSON_OUT.tmp" "$JSON_OUT"
echo "bench-instructions: wrote $JSON_OUT and $top_file" >&2

# For a script to read: the pass and budget ratios, then, last, the hot-SKU
# cost's two judged ratios.
if [ "${PASS_COUNTS:-1}" != 0 ]; then
    print_pass_ratios
fi
echo "redis per reservation / seed call: $(ratio "$redis_hot" "$redis_seed")"
echo "stockd per reservation / actix floor: $(ratio "$api_per_reservation" "$floor_per_request")"
