#!/usr/bin/env bash
# Installs the non-cargo tools the integration tests run, and prints where they are.
#
#   schemathesis (PyPI, CLI `st`), pinned: the 3.x and 4.x CLIs differ a lot and
#   tests/it/openapi.rs passes 4.x flags. If the `st` on PATH is not the pinned
#   version, the pinned one is installed into a venv under target/ (kept between
#   runs, removed by `cargo clean`).
#
# Usage: scripts/test-tools.sh schemathesis
#   prints the absolute path of the `st` to run on its last stdout line; progress
#   goes to stderr. Exits non-zero, saying why, when it cannot be installed.
set -euo pipefail

SCHEMATHESIS_VERSION=4.32.5

cd "$(dirname "$0")/.."
TOOLS_DIR="${CARGO_TARGET_DIR:-$PWD/target}/test-tools"

is_pinned() { [[ -x "$1" ]] && "$1" --version 2>/dev/null | grep -qx "st, version ${SCHEMATHESIS_VERSION}"; }

schemathesis() {
    local on_path venv="$TOOLS_DIR/schemathesis-${SCHEMATHESIS_VERSION}"
    on_path="$(command -v st || true)"
    if [[ -n "$on_path" ]] && is_pinned "$on_path"; then
        echo "$on_path"
        return
    fi
    if ! is_pinned "$venv/bin/st"; then
        command -v python3 >/dev/null || { echo "test-tools: python3 is missing (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
        echo "test-tools: installing schemathesis ${SCHEMATHESIS_VERSION} into $venv" >&2
        rm -rf "$venv"
        mkdir -p "$TOOLS_DIR"
        python3 -m venv "$venv" >&2 || { echo "test-tools: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            "schemathesis==${SCHEMATHESIS_VERSION}" >&2 \
            || { echo "test-tools: pip could not install schemathesis==${SCHEMATHESIS_VERSION} from PyPI" >&2; exit 1; }
        is_pinned "$venv/bin/st" || { echo "test-tools: $venv/bin/st is not schemathesis ${SCHEMATHESIS_VERSION}" >&2; exit 1; }
    fi
    echo "$venv/bin/st"
}

case "${1:-}" in
    schemathesis) schemathesis ;;
    *) echo "usage: $0 schemathesis" >&2; exit 2 ;;
esac
