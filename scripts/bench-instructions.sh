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
# Redis: order.lua and reserve.lua of this checkout (src/redis/lua), in
# calls of $PER_CALL (the acker's XDEL not included). MariaDB: the
# consumer's statements for $ORDERS orders (transactions of 160) in the
# `current` shape and the `lookups` shape before 2026-12-05, and for
# $SINGLES reservations (transactions of 500), over this checkout's schema.
# The shared services are not touched. Takes about two minutes.
#
# Also writes the counts as JSON to $JSON_OUT (default
# bench-out/instructions.json), which `stockd bench report` (the last step of
# `make bench`) puts into BENCHMARKS.md beside the run's bench.json.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d /tmp/stockd-instructions.XXXXXX)}
JSON_OUT=${JSON_OUT:-bench-out/instructions.json}
PER_CALL=${PER_CALL:-16}
CALLS=${CALLS:-200}
ORDERS=${ORDERS:-3200}
SINGLES=${SINGLES:-3000}
# Private ports, overridable: two checkouts measuring at once must not share
# a server (a second run on the same ports fed its statements to the first's
# mariadbd and counted its redis-server's instructions).
RPORT=${RPORT:-16399}
MPORT=${MPORT:-13399}
for port in $RPORT $MPORT; do
    if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
        echo "bench-instructions: 127.0.0.1:$port is taken (another run?); set RPORT/MPORT" >&2
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
    rm -rf "$OUT"
}
trap cleanup EXIT

# instructions <pid> <events> <command...>: runs the command with the pid's
# instrumentation on, then prints the instructions counted per event.
instructions() {
    local pid=$1 events=$2
    shift 2
    callgrind_control -z "$pid" >/dev/null 2>&1
    callgrind_control -i on "$pid" >/dev/null 2>&1
    "$@" >/dev/null
    callgrind_control -i off "$pid" >/dev/null 2>&1
    rm -f "$OUT"/cg.$pid.out.*
    callgrind_control -d "$pid" >/dev/null 2>&1
    local dump=""
    for _ in $(seq 100); do
        dump=$(ls -t "$OUT"/cg.$pid.out.* 2>/dev/null | head -1 || true)
        [ -n "$dump" ] && grep -q '^totals:' "$dump" && break
        sleep 0.1
    done
    local total
    total=$(awk '/^totals:/ {print $2; exit}' "$dump")
    echo $((total / events))
}

start_under_callgrind() { # name, then the server's command line; sets $started
    valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$OUT/cg.%p.out" "${@:2}" >"$OUT/$1.log" 2>&1 &
    started=$!
    pids+=("$started")
}

mkdir -p "$OUT"
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

# Redis: each script in calls of PER_CALL, after 20 unmeasured calls.
redis_run() { # kind script
    $R FLUSHALL >/dev/null
    $W redis-setup | $R >/dev/null
    local sha
    sha=$($R SCRIPT LOAD "$(cat "$2")")
    $W "redis-$1" 20 "$PER_CALL" | sed "s/ SHA / $sha /" | $R >/dev/null
    $W "redis-$1" "$CALLS" "$PER_CALL" 100000 | sed "s/ SHA / $sha /" >"$OUT/redis-$1.txt"
    instructions "$rpid" $((CALLS * PER_CALL)) sh -c "$R <'$OUT/redis-$1.txt'"
}
redis_order=$(redis_run order src/redis/lua/order.lua)
redis_single=$(redis_run reserve src/redis/lua/reserve.lua)

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

# The same counts for `stockd bench report`: the checkout's commit ("-dirty"
# when tracked files differ from it), the servers' versions and the settings.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
redis_version=$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
mariadb_version=$(/usr/sbin/mariadbd --version | sed -n 's/.*Ver \([^ ]*\).*/\1/p')
row() { # key what per_order per_reservation
    printf '    {"key": "%s", "what": "%s", "per_order": %s, "per_reservation": %s}' "$@"
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
    echo "  \"rows\": ["
    row redis_scripts "Redis: order.lua / reserve.lua" "$redis_order" "$redis_single"
    echo ","
    row mariadb_statements "MariaDB: the consumer's statements" "$sql_order" "$sql_single"
    echo ","
    row mariadb_statements_lookups "MariaDB: orders with the orders rows and lines looked up first (the earlier shape)" \
        "$sql_order_before" "$sql_single"
    echo
    echo "  ]"
    echo "}"
} >"$JSON_OUT.tmp"
python3 -m json.tool "$JSON_OUT.tmp" >/dev/null
mv "$JSON_OUT.tmp" "$JSON_OUT"
echo "bench-instructions: wrote $JSON_OUT" >&2
