# Shared by scripts/test-image.sh and scripts/image/kube-play.sh (sourced, not
# run): the run's identity, what it owns, and the clean-up that removes all of
# it by name (containers, pods, secrets, volumes, the gate's pid) and the run's
# data in the shared services (its database, key prefix and queue prefix).
# Callers run under `set -euo pipefail` from the repository root.

export CONTAINERS_CONF="$PWD/scripts/lib/podman-containers.conf"
IMAGE="${IMAGE:-stockd:local}"
# t_<hex>: the test-data names the least-privilege users may touch
# (scripts/services.sh: database stockd%, Redis keys t_*:*, queues ^t_[0-9a-f]+\.).
RUN_ID="${RUN_ID:-t_$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/stockd-image-$RUN_ID.XXXXXX")"
CONTAINERS=()
PODS_YAML=()
PODS=()
SECRETS=()
VOLUMES=()
PIDS=()

log() { echo "test-image: $*" >&2; }
fail() {
    log "FAILED: $*"
    exit 1
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# http_status URL [CURL_ARGS...]: the HTTP status, 000 when nothing answers.
http_status() {
    local url=$1
    shift
    curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" "$url" || true
}

# wait_status WANT URL LIMIT_SECS WHAT: polls until URL answers WANT.
wait_status() {
    local want=$1 url=$2 limit=$3 what=$4 start=$SECONDS
    until [ "$(http_status "$url")" = "$want" ]; do
        [ $((SECONDS - start)) -lt "$limit" ] || fail "$what: $url not $want after ${limit}s"
        sleep 0.5
    done
}

mysql_root() {
    mariadb --protocol=tcp -h127.0.0.1 -P3306 -uroot --password= -N -B "$@"
}

# Everything this run made, by name or pid; runs on every exit (trap).
cleanup() {
    local status=$?
    set +e
    for c in "${CONTAINERS[@]}"; do
        if [ "$status" != 0 ]; then
            log "logs of $c:" && podman logs --tail 30 "$c" >&2 2>&1
        fi
        podman rm -f -t 0 "$c" >/dev/null 2>&1
    done
    for y in "${PODS_YAML[@]}"; do podman kube down "$y" >/dev/null 2>&1; done
    for p in "${PODS[@]}"; do podman pod rm -f "$p" >/dev/null 2>&1; done
    for s in "${SECRETS[@]}"; do podman secret rm "$s" >/dev/null 2>&1; done
    for v in "${VOLUMES[@]}"; do podman volume rm -f "$v" >/dev/null 2>&1; done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    mysql_root -e "DROP DATABASE IF EXISTS \`stockd_$RUN_ID\`" 2>/dev/null
    redis-cli -h 127.0.0.1 -p 6379 --scan --pattern "$RUN_ID:*" \
        | xargs -r -d '\n' -n 500 redis-cli -h 127.0.0.1 -p 6379 del >/dev/null
    for q in $(timeout 60 rabbitmqctl -q list_queues --no-table-headers name 2>/dev/null | grep "^$RUN_ID\."); do
        timeout 60 rabbitmqctl -q delete_queue "$q" >/dev/null
    done
    # rabbitmqctl has no delete_exchange: delete the run's inside the broker.
    timeout 60 rabbitmqctl -q eval "
        lists:foreach(fun(X) ->
            R = element(2, X),
            case binary:match(element(4, R), <<\"$RUN_ID.\">>) of
                {0, _} -> rabbit_exchange:delete(R, false, <<\"test-image\">>);
                _ -> ok
            end
        end, rabbit_exchange:list(<<\"/\">>))." >/dev/null 2>&1
    rm -rf "$WORK"
    [ "$status" = 0 ] && log "cleaned up run $RUN_ID" || log "cleaned up run $RUN_ID (after a failure)"
    exit "$status"
}
