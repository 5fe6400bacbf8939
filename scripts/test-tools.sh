#!/usr/bin/env bash
# Installs the non-cargo tools the integration tests run, and prints where they are.
#
#   schemathesis (PyPI, CLI `st`), pinned: the 3.x and 4.x CLIs differ a lot and
#   tests/it/openapi.rs passes 4.x flags. If the `st` on PATH is not the pinned
#   version, the pinned one is installed into a venv under target/ (kept between
#   runs, removed by `cargo clean`).
#   otlp-receiver: a Python with PyPI `opentelemetry-proto` (pinned), which
#   runs tests/otlp_receiver.py, the OTLP/HTTP receiver of tests/it/tracing.rs
#   and scripts/bench-tracing.sh; installed into a venv under target/ likewise.
#   events-checker: a Python with PyPI `cloudevents` and `jsonschema` (both
#   pinned), which runs tests/events_check.py, the check of captured events
#   against docs/asyncapi.json; installed into a venv under target/ likewise.
#
# Usage: scripts/test-tools.sh schemathesis|otlp-receiver|events-checker
#   prints the absolute path of the `st` (or the `python`) to run on its last
#   stdout line; progress goes to stderr. Exits non-zero, saying why, when it
#   cannot be installed.
set -euo pipefail

SCHEMATHESIS_VERSION=4.32.5
OTLP_PROTO_VERSION=1.39.1
CLOUDEVENTS_VERSION=2.2.0
JSONSCHEMA_VERSION=4.26.0

cd "$(dirname "$0")/.."
TOOLS_DIR="${CARGO_TARGET_DIR:-$PWD/target}/test-tools"

is_pinned() { [[ -x "$1" ]] && "$1" --version 2>/dev/null | grep -qx "st, version ${SCHEMATHESIS_VERSION}"; }

# pip_venv "SPEC..." VENV CHECK...: a fresh VENV holding the pip SPECs (a
# space-separated list of NAME==VERSION) from PyPI, then CHECK (a command) must
# succeed, or it exits saying why.
pip_venv() {
    local specs=$1 venv=$2
    shift 2
    command -v python3 >/dev/null || { echo "test-tools: python3 is missing (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
    echo "test-tools: installing ${specs} into $venv" >&2
    rm -rf "$venv"
    mkdir -p "$TOOLS_DIR"
    python3 -m venv "$venv" >&2 || { echo "test-tools: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
    # shellcheck disable=SC2086 # $specs splits into one word per spec
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $specs >&2 \
        || { echo "test-tools: pip could not install ${specs} from PyPI" >&2; exit 1; }
    "$@" || { echo "test-tools: $venv has no ${specs}" >&2; exit 1; }
}

schemathesis() {
    local on_path venv="$TOOLS_DIR/schemathesis-${SCHEMATHESIS_VERSION}"
    on_path="$(command -v st || true)"
    if [[ -n "$on_path" ]] && is_pinned "$on_path"; then
        echo "$on_path"
        return
    fi
    is_pinned "$venv/bin/st" || pip_venv "schemathesis==${SCHEMATHESIS_VERSION}" "$venv" is_pinned "$venv/bin/st"
    echo "$venv/bin/st"
}

has_proto() { [[ -x "$1" ]] && "$1" -c 'import importlib.metadata as m, sys; sys.exit(m.version("opentelemetry-proto") != sys.argv[1])' "$OTLP_PROTO_VERSION" 2>/dev/null; }

otlp_receiver() {
    local venv="$TOOLS_DIR/otlp-proto-${OTLP_PROTO_VERSION}"
    has_proto "$venv/bin/python" || pip_venv "opentelemetry-proto==${OTLP_PROTO_VERSION}" "$venv" has_proto "$venv/bin/python"
    echo "$venv/bin/python"
}

has_event_libs() {
    [[ -x "$1" ]] && "$1" -c 'import importlib.metadata as m, sys
sys.exit(m.version("cloudevents") != sys.argv[1] or m.version("jsonschema") != sys.argv[2])' \
        "$CLOUDEVENTS_VERSION" "$JSONSCHEMA_VERSION" 2>/dev/null
}

events_checker() {
    local venv="$TOOLS_DIR/events-check-cloudevents-${CLOUDEVENTS_VERSION}-jsonschema-${JSONSCHEMA_VERSION}"
    has_event_libs "$venv/bin/python" \
        || pip_venv "cloudevents==${CLOUDEVENTS_VERSION} jsonschema==${JSONSCHEMA_VERSION}" "$venv" has_event_libs "$venv/bin/python"
    echo "$venv/bin/python"
}

# Tests run in parallel and two may ask for the same tool on a fresh clone:
# one install at a time (flock, util-linux), and the second caller then finds
# the tool installed instead of removing the first one's half-made venv.
mkdir -p "$TOOLS_DIR"
exec 9>"$TOOLS_DIR/.install.lock"
flock 9

case "${1:-}" in
    schemathesis) schemathesis ;;
    otlp-receiver) otlp_receiver ;;
    events-checker) events_checker ;;
    *) echo "usage: $0 schemathesis|otlp-receiver|events-checker" >&2; exit 2 ;;
esac
