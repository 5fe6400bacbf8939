#!/bin/bash
# The image's HEALTHCHECK: GET /readyz on the role's own probe port over bash's
# /dev/tcp (the image has no curl). Healthy (exit 0) only on a 200.
#   api, all      -> the port of STOCKD__HTTP__BIND (production.yaml: 8080)
#   other roles   -> the port of STOCKD__METRICS__BIND (base.yaml: 9091)
# A role started with a different bind in a config file, not the environment,
# sets STOCKD_PROBE_PORT. A plain-HTTP probe: with http.tls on, probe over TLS
# from the orchestrator instead.
set -eu

case "${STOCKD_ROLE:-api}" in
    api | all) bind="${STOCKD__HTTP__BIND:-0.0.0.0:8080}" ;;
    *) bind="${STOCKD__METRICS__BIND:-127.0.0.1:9091}" ;;
esac
port="${STOCKD_PROBE_PORT:-${bind##*:}}"

# The HEALTHCHECK's --timeout kills a hung connect; read -t bounds the answer.
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
read -r -t 3 _ status _ <&3
[ "$status" = 200 ]
