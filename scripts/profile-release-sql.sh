#!/usr/bin/env bash
# Where one release's MariaDB instructions go (BENCHMARKS.md, "Instructions
# per release"): the closer's batched expiry statements
# (`ops/lifecycle/expire_many.rs`, as scripts/lib/instructions_workload.py
# writes them) run part by part against a private mariadbd under
# `valgrind --tool=callgrind`, and the instructions per release printed for
# each subset of parts: `none` is the transaction alone, the last line every
# part together (what scripts/bench-instructions.sh reports). Batches of
# $PER_TX (default 500) of $SINGLES reservations (default 3000).
#
# Port $MPORT (default 13398; a taken port stops the run), data in a
# temporary directory; the server is removed by pid, with its data, even on
# failure. Takes about five minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
MPORT=${MPORT:-13398}
PER_TX=${PER_TX:-500}
SINGLES=${SINGLES:-3000}
if (exec 3<>/dev/tcp/127.0.0.1/$MPORT) 2>/dev/null; then
    echo "profile-release-sql: 127.0.0.1:$MPORT is taken (another run?); set MPORT" >&2
    exit 1
fi
command -v valgrind >/dev/null || { echo "profile-release-sql: run scripts/bench-instructions.sh once (it installs valgrind)" >&2; exit 1; }
OUT=$(mktemp -d /tmp/stockd-release-sql.XXXXXX)
W="python3 scripts/lib/instructions_workload.py"
mpid=""
cleanup() {
    if [ -n "$mpid" ]; then
        kill "$mpid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$mpid" 2>/dev/null || true
    fi
    rm -rf "$OUT"
}
trap cleanup EXIT

. scripts/lib/callgrind.sh

mariadb-install-db --no-defaults --datadir="$OUT/mysql" --auth-root-authentication-method=normal >"$OUT/install.log" 2>&1
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/cg.%p.out" \
    /usr/sbin/mariadbd --no-defaults --datadir="$OUT/mysql" --port="$MPORT" --socket="$OUT/mysql.sock" \
    --bind-address=127.0.0.1 --user=root --skip-log-bin --innodb-buffer-pool-size=256M --innodb-buffer-pool-size-max=256M \
    --innodb-use-native-aio=0 >"$OUT/mariadbd.log" 2>&1 &
mpid=$!
M="mariadb -uroot -h127.0.0.1 -P$MPORT"
for _ in $(seq 300); do $M -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.2; done

# Instructions per release of the parts "$1" (comma-separated).
run() {
    $M -e 'DROP DATABASE IF EXISTS bench; CREATE DATABASE bench'
    for f in sql/*.sql; do $M bench <"$f"; done
    $W sql-setup | $M bench
    $W sql-singles "$SINGLES" | $M bench >/dev/null
    $W sql-expire "$SINGLES" "$PER_TX" 1 "$1" >"$OUT/sql.txt"
    instructions "$mpid" "$SINGLES" sh -c "$M bench <'$OUT/sql.txt'"
}
echo "profile-release-sql: MariaDB instructions per release, batches of $PER_TX"
for parts in none read lock locked_read update give_back events update,clear \
    read,lock,locked_read,update,give_back,events,clear; do
    echo "$parts $(run "$parts")"
done
