# Step 7 of scripts/test-image.sh (sourced): the Kubernetes manifests run. The
# base rendered by `kubectl kustomize`, its ConfigMap and the api and consumer
# Deployments (cut by kube_play.py to what podman 4.3 takes, see there), a
# Secret in podman's store, `podman kube play`; then the api pod must turn
# ready on its readinessProbe's path and serve a reservation that the consumer
# pod writes to MySQL. The pods, the Secret and the volumes podman made for the
# ConfigMap and the Secret are removed by name (cleanup in lib.sh).

kube_play() {
    scripts/container-tools.sh kube
    local python
    python="$(dirname "$(scripts/container-tools.sh validate)")/python"
    local -A kp
    for p in api.http api.admin consumer.metrics; do kp[$p]=$(free_port); done
    local env_json
    env_json=$(
        "$python" - "$SECRET_DIR" "$CLIENTS" "${kp[api.http]}" "${kp[api.admin]}" \
            "${kp[consumer.metrics]}" "$PWD/config" "$IMAGE" <<'EOF'
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
secrets = {f.name: f.read_text().strip() for f in d.iterdir()}
# The kube pods reach MariaDB directly (the gate of step 2 is for the containers).
secrets["mysql-url"] = secrets["mysql-url"].rsplit("@", 1)[0] + "@127.0.0.1:3306/" + secrets["mysql-url"].rsplit("/", 1)[1]
print(json.dumps({"secrets": secrets, "clients": sys.argv[2], "config_dir": sys.argv[6], "image": sys.argv[7],
                  "ports": {"api.http": int(sys.argv[3]), "api.admin": int(sys.argv[4]),
                            "consumer.metrics": int(sys.argv[5])}}))
EOF
    )
    local config_map
    config_map=$(kubectl kustomize deploy/kubernetes/base 2>/dev/null \
        | "$python" scripts/image/kube_play.py "$WORK" "$RUN_ID" "$env_json")
    SECRETS+=(stockd-secrets)
    VOLUMES+=(stockd-secrets "$config_map")
    PODS_YAML+=("$WORK/play.yaml")
    PODS+=("$RUN_ID-stockd-api-pod-0" "$RUN_ID-stockd-consumer-pod-0")
    podman secret create stockd-secrets "$WORK/secret.json" >/dev/null
    podman kube play "$WORK/play.yaml" >"$WORK/play.log" 2>&1 || { cat "$WORK/play.log" >&2; fail "podman kube play"; }
    local api="http://127.0.0.1:${kp[api.http]}"
    wait_status 200 "$api/readyz" 90 "kube api pod ready"
    wait_status 200 "http://127.0.0.1:${kp[consumer.metrics]}/readyz" 60 "kube consumer pod ready"
    local user
    user=$(podman exec "$RUN_ID-stockd-api-pod-0-stockd" id -u)
    [ "$user" = 10001 ] || fail "kube api pod runs as $user"
    put_sku "http://127.0.0.1:${kp[api.admin]}" 3 5 1
    local answer
    answer=$(reserve "$api" 3 via-kube 7)
    [[ $answer == *" 201" || $answer == *" 202" ]] || fail "kube api reservation: $answer"
    local start=$SECONDS
    until ledger_ids 3 | grep -qx via-kube; do
        [ $((SECONDS - start)) -lt 60 ] || fail "the kube reservation never reached MySQL"
        sleep 1
    done
    log "   kube play: api and consumer pods ready, a reservation served and in MySQL"
}
