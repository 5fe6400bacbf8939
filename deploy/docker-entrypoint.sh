#!/bin/sh
# Container entrypoint for stockd.
#   no arguments  -> stockd --role "$STOCKD_ROLE"   (STOCKD_ROLE defaults to api)
#   arguments     -> stockd "$@"                     (e.g. `migrate`, `config print`)
# `exec` so stockd is PID 1 and receives SIGTERM from `docker stop` directly.
# For a shell in the image use `docker run --entrypoint sh`.
set -eu

if [ "$#" -eq 0 ]; then
    exec /usr/local/bin/stockd --role "${STOCKD_ROLE:-api}"
fi
exec /usr/local/bin/stockd "$@"
