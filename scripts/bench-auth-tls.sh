#!/usr/bin/env bash
# What TLS on the listeners plus client tokens cost (issue 27, docs/benchmarks-history.md,
# "Auth and TLS on the listeners"): `stockd-bench --target` against one
# `stockd --role all` with durability redis, listeners plain and open (off) vs
# TLS + auth.required with one client (on), alternating, same machine.
# Needs a release build (`cargo build --release --workspace`) and openssl; writes to $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bench-auth-tls}
mkdir -p "$OUT" && cd "$OUT"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
  -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
  -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >ext.cnf
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
  -extfile ext.cnf 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in server.key -out server.p8
head -c 32 /dev/urandom | base64 | tr -d '/+=\n' >token
tr -d '\n' <token | sha256sum | cut -d' ' -f1 >token.sha256
cd - >/dev/null
S=./target/release/stockd
B=./target/release/stockd-bench
env STOCKD_ENV=local $(scripts/services.sh env migrate) $S migrate >/dev/null
start() { # $1 = off|on; prints the pid
  local extra=()
  if [ "$1" = on ]; then
    extra=(STOCKD__HTTP__TLS__CERT_FILE=$OUT/server.pem STOCKD__HTTP__TLS__KEY_FILE=$OUT/server.p8
      STOCKD__AUTH__REQUIRED=true
      "STOCKD__AUTH__CLIENTS=[{name: bench, token_sha256: \"$(cat $OUT/token.sha256)\", scopes: [reserve, read, lifecycle]}]")
  fi
  env STOCKD_ENV=local $(scripts/services.sh env runtime) STOCKD__RESERVATION__DURABILITY=redis \
    STOCKD__HTTP__BIND=127.0.0.1:18080 "${extra[@]}" $S --role all >$OUT/stockd-$1.log 2>&1 &
  echo $!
}
for round in 1 2 3 4; do
  for mode in off on; do
    pid=$(start $mode)
    if [ $mode = on ]; then url=https://localhost:18080; tls=(--ca-file $OUT/ca.pem --token-file $OUT/token); curlx=(--cacert $OUT/ca.pem);
    else url=http://127.0.0.1:18080; tls=(); curlx=(); fi
    for _ in $(seq 100); do curl -sf "${curlx[@]}" $url/readyz >/dev/null 2>&1 && break; sleep 0.2; done
    echo "== round $round $mode (pid $pid), load $(cut -d' ' -f1 /proc/loadavg)"
    env STOCKD_ENV=local $B --target $url "${tls[@]}" --admin-token dev-admin-token --target-pid $pid \
      --out-dir $OUT/$mode$round 2>&1 | grep -E 'stockd-bench: reserve_target|correctness|error'; grep -E '^\| reserve_target' $OUT/$mode$round/bench.md
    kill $pid; while kill -0 $pid 2>/dev/null; do sleep 0.2; done
  done
done
