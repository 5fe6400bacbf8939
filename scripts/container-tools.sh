#!/usr/bin/env bash
# Installs what `make image`, `make test-image` and the manifest test need when
# it is missing, so a fresh machine gets them from its own registries:
#
#   engine     podman + runc (Debian; crun, podman's default runtime, fails on
#              rlimits and hybrid cgroups here), debootstrap (the base images,
#              scripts/image-base.sh), curl (the probes from the host)
#   kube       kubectl (Debian's kubernetes-client when no kubectl is on PATH):
#              `kubectl kustomize` renders deploy/kubernetes
#   validate   kubernetes-validate (PyPI, pinned) in a venv under target/
#
# Usage: scripts/container-tools.sh engine|kube|validate
#   validate prints the absolute path of the tool on their last
#   stdout line; progress goes to stderr. Never starts a daemon (apt.sh's
#   policy-rc.d). Exits non-zero, saying why, when a tool cannot be installed.
set -euo pipefail
APT_TAG=container-tools
. "$(dirname "$0")/lib/apt.sh"

KUBERNETES_VALIDATE_VERSION=1.37.0

cd "$(dirname "$0")/.."
TOOLS_DIR="${CARGO_TARGET_DIR:-$PWD/target}/test-tools"

engine() {
    local need=()
    command -v podman >/dev/null 2>&1 || need+=(podman)
    command -v runc >/dev/null 2>&1 || need+=(runc)
    command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
    command -v curl >/dev/null 2>&1 || need+=(curl)
    command -v socat >/dev/null 2>&1 || need+=(socat)
    [ -x /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null 2>&1 || need+=(catatonit)
    [ ${#need[@]} -eq 0 ] || { apt_lock; apt_install "${need[@]}"; }
    echo "container-tools: podman, runc, debootstrap present" >&2
}

kube() {
    command -v kubectl >/dev/null 2>&1 || { apt_lock; apt_install kubernetes-client; }
    kubectl kustomize --help >/dev/null 2>&1 \
        || { echo "container-tools: this kubectl has no kustomize" >&2; exit 1; }
    echo "container-tools: $(command -v kubectl) present" >&2
}

# pip_tool NAME VERSION BIN: the pinned PyPI tool in its own venv under target/.
pip_tool() {
    local name=$1 version=$2 bin=$3 venv="$TOOLS_DIR/$1-$2"
    if [ ! -x "$venv/bin/$bin" ]; then
        command -v python3 >/dev/null \
            || { echo "container-tools: python3 is missing" >&2; exit 1; }
        exec 8>"${TMPDIR:-/tmp}/stockd-$name.lock"
        flock 8
        if [ ! -x "$venv/bin/$bin" ]; then
            echo "container-tools: installing $name $version into $venv" >&2
            rm -rf "$venv"
            mkdir -p "$TOOLS_DIR"
            python3 -m venv "$venv" >&2
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                "$name==$version" >&2 \
                || { rm -rf "$venv"; echo "container-tools: pip could not install $name==$version" >&2; exit 1; }
        fi
    fi
    echo "$venv/bin/$bin"
}

case "${1:-}" in
    engine) engine ;;
    kube) kube ;;
    validate) pip_tool kubernetes-validate "$KUBERNETES_VALIDATE_VERSION" kubernetes-validate ;;
    *) echo "usage: $0 engine|kube|validate" >&2; exit 2 ;;
esac
