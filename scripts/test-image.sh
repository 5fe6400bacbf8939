#!/usr/bin/env bash
# `make test-image`: the image built by `make image`, run for real with podman
# against this machine's shared Redis, MariaDB and RabbitMQ (host network), as
# the least-privilege users, under this run's own database, key prefix and
# queue prefix (RUN_ID), so it disturbs no other test:
#
#   1. `config check` and `migrate` (the migration user) in one-shot containers;
#   2. two api replicas, a consumer, a closer and a reconciler started while
#      MariaDB is unreachable to them (their MySQL port is a gate nobody listens
#      on yet): each stays up, /livez 200, /readyz 503 "starting";
#   3. the gate opens (socat to MariaDB): every role turns ready by itself;
#   4. non-root, read-only root filesystem, the HEALTHCHECK answers;
#   5. a reservation through each api replica, then SOLD_OUT on both;
#   6. SIGTERM (podman stop) to an api replica under load: it exits 0 within
#      its grace period and every accepted reservation reaches MySQL;
#   7. kube_play (scripts/image/kube-play.sh): the Kubernetes Deployments of the api and
#      the consumer under `podman kube play` serve a reservation.
#
# Every container, pod, secret and volume it makes is removed by name at exit,
# also on failure (trap), and the run's data is dropped from the services.
set -euo pipefail
cd "$(dirname "$0")/.."
# One run at a time on a machine: podman's secret store is global and the kube
# manifests name their Secret `stockd-secrets`. The lock is held by `flock -o`
# around this script, not on an fd of the script: every container's conmon and
# the MariaDB gate would inherit such an fd, and one left behind by a killed run
# would hold the lock for ever.
if [ -z "${STOCKD_TEST_IMAGE_LOCKED:-}" ]; then
    exec env STOCKD_TEST_IMAGE_LOCKED=1 flock -o "${TMPDIR:-/tmp}/stockd-test-image.lock" "$0" "$@"
fi
. scripts/image/lib.sh
. scripts/image/serve-check.sh
. scripts/image/kube-play.sh
trap cleanup EXIT

scripts/container-tools.sh engine
podman image exists "$IMAGE" || fail "$IMAGE missing: run make image"
log "run $RUN_ID, image $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"

# ---- secrets as files, what a Kubernetes Secret mount gives the pod
runtime_env=$(scripts/services.sh env runtime)
migrate_env=$(scripts/services.sh env migrate)
value() { sed -n "s/^$1=//p" <<<"$2"; }
GATE=$(free_port)
mysql_app=$(value STOCKD__MYSQL__URL "$runtime_env" | sed "s#:3306/stockd\$#:$GATE/stockd_$RUN_ID#")
mysql_migrate=$(value STOCKD__MYSQL__URL "$migrate_env" | sed "s#/stockd\$#/stockd_$RUN_ID#")
ADMIN_TOKEN=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
CLIENT_TOKEN=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
CLIENT_SHA=$(printf %s "$CLIENT_TOKEN" | sha256sum | cut -d' ' -f1)
CLIENTS="[{name: orders, token_sha256: \"$CLIENT_SHA\", scopes: [reserve, read, lifecycle]}]"
SECRET_DIR="$WORK/secrets"
mkdir -p "$SECRET_DIR"
printf '%s\n' "$mysql_app" >"$SECRET_DIR/mysql-url"
printf '%s\n' "$mysql_migrate" >"$SECRET_DIR/mysql-migrate-url"
value STOCKD__REDIS__URL "$runtime_env" >"$SECRET_DIR/redis-url"
value STOCKD__AMQP__URL "$runtime_env" >"$SECRET_DIR/amqp-url"
printf '%s\n' "$ADMIN_TOKEN" >"$SECRET_DIR/admin-token"
# Readable by the image's user 10001 (the files are root's); the dir is this run's.
chmod 0755 "$WORK" "$SECRET_DIR" && chmod 0644 "$SECRET_DIR"/*

# stockd_run NAME [PODMAN_ARGS...] -- [STOCKD_ARGS...]: what every container gets.
STOCKD_FLAGS=(--network host --read-only --cap-drop ALL --security-opt no-new-privileges
    -v "$SECRET_DIR:/run/secrets/stockd:ro"
    -e STOCKD__MYSQL__URL_FILE=/run/secrets/stockd/mysql-url
    -e STOCKD__REDIS__URL_FILE=/run/secrets/stockd/redis-url
    -e STOCKD__AMQP__URL_FILE=/run/secrets/stockd/amqp-url
    -e STOCKD__ADMIN__TOKEN_FILE=/run/secrets/stockd/admin-token
    -e "STOCKD__AUTH__CLIENTS=$CLIENTS"
    -e "STOCKD__REDIS__KEY_PREFIX=$RUN_ID:" -e "STOCKD__AMQP__QUEUE_PREFIX=$RUN_ID."
    # One client IP (loopback) sends the whole load of step 6.
    -e STOCKD__LIMITS__PER_IP_RPS=0 -e STOCKD__LIMITS__PER_USER_RPS=0)

log "1. config check, migrate"
out=$(podman run --rm "${STOCKD_FLAGS[@]}" "$IMAGE" config check 2>&1) || fail "config check: $out"
grep -q "configuration OK (environment production)" <<<"$out" || fail "config check: $out"
out=$(podman run --rm "${STOCKD_FLAGS[@]}" -e STOCKD__MYSQL__URL_FILE=/run/secrets/stockd/mysql-migrate-url \
    "$IMAGE" migrate 2>&1) || fail "migrate: $out"
log "   $(grep '^migrate: ' <<<"$out")"

log "2. every role started while MariaDB is unreachable (port $GATE closed)"
declare -A PORT
start_role() { # start_role NAME ROLE BIND_VAR [BIND_VAR...]
    local short=$1 name="stockd-$RUN_ID-$1" role=$2
    shift 2
    local binds=()
    for var in "$@"; do
        PORT[$short.$var]=$(free_port)
        binds+=(-e "$var=127.0.0.1:${PORT[$short.$var]}")
    done
    CONTAINERS+=("$name")
    podman run -d --name "$name" --stop-timeout 30 "${STOCKD_FLAGS[@]}" -e "STOCKD_ROLE=$role" \
        "${binds[@]}" "$IMAGE" >/dev/null
}
start_role api1 api STOCKD__HTTP__BIND STOCKD__ADMIN__BIND
start_role api2 api STOCKD__HTTP__BIND STOCKD__ADMIN__BIND
for role in consumer closer reconciler; do start_role "$role" "$role" STOCKD__METRICS__BIND; done
probe_of() { # probe_of NAME: the base URL of its /livez and /readyz
    case $1 in
        api*) echo "http://127.0.0.1:${PORT[$1.STOCKD__HTTP__BIND]}" ;;
        *) echo "http://127.0.0.1:${PORT[$1.STOCKD__METRICS__BIND]}" ;;
    esac
}
ROLES=(api1 api2 consumer closer reconciler)
for r in "${ROLES[@]}"; do wait_status 200 "$(probe_of "$r")/livez" 60 "$r waiting"; done
sleep 3 # several connect attempts of the back-off
for r in "${ROLES[@]}"; do
    [ "$(podman inspect -f '{{.State.Running}}' "stockd-$RUN_ID-$r")" = true ] || fail "$r exited while MySQL was down"
    body=$(curl -s "$(probe_of "$r")/readyz")
    grep -q '"starting"' <<<"$body" && grep -q mysql <<<"$body" || fail "$r /readyz: $body"
done
log "   every role up, /livez 200, /readyz 503 starting (waiting for mysql)"

log "3. the gate opens: MariaDB reachable"
socat "TCP-LISTEN:$GATE,bind=127.0.0.1,fork,reuseaddr" TCP:127.0.0.1:3306 &
PIDS+=($!)
for r in "${ROLES[@]}"; do wait_status 200 "$(probe_of "$r")/readyz" 60 "$r ready"; done
log "   every role ready, no restart"

log "4. non-root, read-only root filesystem, HEALTHCHECK"
api1="stockd-$RUN_ID-api1"
[ "$(podman exec "$api1" id -u)" = 10001 ] || fail "api runs as $(podman exec "$api1" id -u)"
out=$(podman exec "$api1" touch /etc/stockd/x 2>&1 || true)
grep -q "Read-only file system" <<<"$out" || fail "root filesystem writable: $out"
for r in api1 consumer; do podman healthcheck run "stockd-$RUN_ID-$r" >/dev/null || fail "HEALTHCHECK of $r"; done

serve_check "$(probe_of api1)" "$(probe_of api2)" \
    "http://127.0.0.1:${PORT[api1.STOCKD__ADMIN__BIND]}" "stockd-$RUN_ID-api2"

log "7. podman kube play of the api and consumer Deployments"
kube_play

log "PASSED (run $RUN_ID)"
