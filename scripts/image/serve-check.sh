# Steps 5 and 6 of scripts/test-image.sh (sourced): reservations through both
# api replicas and the sold-out answer on both; then SIGTERM to one replica
# under load, which must exit 0 within its grace period, and every reservation
# it accepted (201/202) must reach MySQL's ledger.

# Requests of the load on the replica being stopped, and how many at once.
LOAD_REQUESTS=3000
LOAD_PARALLEL=8
# podman stop's timeout: the grace before SIGKILL (deploy/kubernetes: 30 s).
STOP_GRACE_SECS=30

# reserve BASE SKU REQUEST_ID USER: "<status> <body>" of one reservation.
reserve() {
    curl -s --max-time 10 -w ' %{http_code}' -H "Authorization: Bearer $CLIENT_TOKEN" \
        -H 'Content-Type: application/json' \
        -d "{\"request_id\": \"$3\", \"user_id\": $4, \"count\": 1}" \
        "$1/v1/skus/$2/reservations" || true
}

put_sku() { # put_sku ADMIN_BASE SKU TOTAL LIMIT
    local status
    status=$(http_status "$1/v1/admin/skus/$2" -X PUT -H "Authorization: Bearer $ADMIN_TOKEN" \
        -H 'Content-Type: application/json' -d "{\"total_stock\": $3, \"limit_per_user\": $4}")
    [ "$status" = 200 ] || [ "$status" = 201 ] || fail "PUT sku $2: $status"
}

ledger_ids() { # ledger_ids SKU: request ids of the SKU's ledger rows in this run's database, sorted
    mysql_root -e "SELECT deduct_request_id FROM \`stockd_$RUN_ID\`.stock_deduct_idempotent WHERE sku_id = $1" | sort
}

# serve_check API1 API2 ADMIN1 API2_CONTAINER
serve_check() {
    local api1=$1 api2=$2 admin=$3 victim=$4 answer
    log "5. a reservation through each api replica, then SOLD_OUT on both"
    put_sku "$admin" 1 2 1
    answer=$(reserve "$api1" 1 via-api1 1)
    [[ $answer == *" 201" || $answer == *" 202" ]] || fail "api1 reservation: $answer"
    answer=$(reserve "$api2" 1 via-api2 2)
    [[ $answer == *" 201" || $answer == *" 202" ]] || fail "api2 reservation: $answer"
    for base in "$api1" "$api2"; do
        answer=$(reserve "$base" 1 "late-$RANDOM" 3)
        [[ $answer == *SOLD_OUT*" 409" ]] || fail "sold out on $base: $answer"
        curl -s -H "Authorization: Bearer $CLIENT_TOKEN" "$base/v1/skus/1" | grep -q '"sold_out":true' \
            || fail "$base does not show SKU 1 sold out"
    done
    log "   201/202 on api1 and api2, then 409 SOLD_OUT and sold_out:true on both"

    log "6. SIGTERM to api2 under load"
    put_sku "$admin" 2 1000000 1000000
    local results="$WORK/load.txt"
    export -f reserve
    export CLIENT_TOKEN
    seq 1 "$LOAD_REQUESTS" | xargs -P "$LOAD_PARALLEL" -I{} bash -c \
        'echo "{} $(reserve "$0" 2 "load-{}" {} | tail -c 3)"' "$api2" >"$results" &
    local load=$!
    sleep 2
    local started=$SECONDS
    podman stop -t "$STOP_GRACE_SECS" "$victim" >/dev/null
    local took=$((SECONDS - started))
    wait "$load" || true
    local code accepted
    code=$(podman inspect -f '{{.State.ExitCode}}' "$victim")
    accepted=$(grep -cE ' 20[12]$' "$results" || true)
    [ "$code" = 0 ] || fail "api2 exited $code after SIGTERM"
    [ "$took" -lt "$STOP_GRACE_SECS" ] || fail "api2 took ${took}s to stop (grace ${STOP_GRACE_SECS}s)"
    [ "$accepted" -gt 0 ] || fail "no reservation accepted before the stop"
    # Every request id answered 201/202 must be in the ledger (the consumer
    # applies the last ones within a second or so).
    grep -E ' 20[12]$' "$results" | awk '{print "load-" $1}' | sort >"$WORK/accepted.txt"
    local start=$SECONDS missing
    while missing=$(comm -23 "$WORK/accepted.txt" <(ledger_ids 2) | wc -l) && [ "$missing" != 0 ]; do
        [ $((SECONDS - start)) -lt 60 ] || fail "$missing of $accepted accepted reservations not in MySQL"
        sleep 1
    done
    log "   api2 exited 0 in ${took}s; $accepted accepted before it stopped, all $accepted in MySQL"
}
