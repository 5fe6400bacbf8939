#!/usr/bin/env bash
# What distributed tracing costs (issue 30, docs/benchmarks-history.md, "Tracing"):
# `stockd-bench --target` against one `stockd --role all` with durability
# queue, tracing off (no telemetry.otlp.endpoint) vs on at a 1 % sample vs on
# at 100 %, alternating in rounds on the same machine. The collector is
# tests/otlp_receiver.py as a sink (decodes every export, keeps a count).
# Needs a release build (`cargo build --release --workspace`); writes to $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bench-tracing}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
S=./target/release/stockd
B=./target/release/stockd-bench
PY=$(scripts/test-tools.sh otlp-receiver | tail -1)
OTLP_PORT=14318
$PY tests/otlp_receiver.py $OTLP_PORT - >"$OUT/receiver.log" 2>&1 &
receiver=$!
trap 'kill $receiver 2>/dev/null || true' EXIT
env STOCKD_ENV=local $(scripts/services.sh env migrate) $S migrate >/dev/null
start() { # $1 = off|on1|on100; prints the pid
  local extra=()
  case $1 in
    on1) extra=(STOCKD__TELEMETRY__OTLP__ENDPOINT=http://127.0.0.1:$OTLP_PORT STOCKD__TELEMETRY__OTLP__SAMPLE_RATIO=0.01) ;;
    on100) extra=(STOCKD__TELEMETRY__OTLP__ENDPOINT=http://127.0.0.1:$OTLP_PORT STOCKD__TELEMETRY__OTLP__SAMPLE_RATIO=1) ;;
  esac
  env STOCKD_ENV=local $(scripts/services.sh env runtime) STOCKD__RESERVATION__DURABILITY=queue \
    STOCKD__HTTP__BIND=127.0.0.1:18080 "${extra[@]}" $S --role all >"$OUT/stockd-$1.log" 2>&1 &
  echo $!
}
for round in $(seq "$ROUNDS"); do
  for mode in off on1 on100; do
    pid=$(start $mode)
    url=http://127.0.0.1:18080
    for _ in $(seq 100); do curl -sf $url/readyz >/dev/null 2>&1 && break; sleep 0.2; done
    echo "== round $round $mode (pid $pid), load $(cut -d' ' -f1 /proc/loadavg), spans received $(curl -s http://127.0.0.1:$OTLP_PORT/count)"
    env STOCKD_ENV=local $B --target $url --admin-token dev-admin-token --target-pid $pid \
      --out-dir "$OUT/$mode$round" 2>&1 | grep -E 'stockd-bench: reserve_target|correctness|error' || true
    grep -E '^\| reserve_target' "$OUT/$mode$round/bench.md" || true
    kill $pid; while kill -0 $pid 2>/dev/null; do sleep 0.2; done
  done
done
echo "spans received in all: $(curl -s http://127.0.0.1:$OTLP_PORT/count)"
