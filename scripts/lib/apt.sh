# Shared by scripts/check-tools.sh and scripts/browser-tools.sh (sourced, not
# run): the one lock every apt-using installer of the project takes, and the
# apt-get install that starts no daemon. Callers set APT_TAG (their name, for
# messages) and run under `set -euo pipefail`.

# Takes the installers' shared lock on fd 9, held until the caller exits:
# several tests may call at once; one installs, the others wait and re-check.
apt_lock() {
    exec 9>"${TMPDIR:-/tmp}/stockd-check-tools.lock"
    flock 9
}

# apt_install PACKAGE...: installs Debian packages as root, with a temporary
# policy-rc.d that forbids service starts. Exits non-zero, saying why, when it
# cannot (not root, no apt-get, apt-get failed).
apt_install() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "${APT_TAG}: missing $* and cannot install (need root and apt-get)" >&2
        exit 1
    fi
    local policy=/usr/sbin/policy-rc.d created_policy=0 status=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod +x "$policy"
        created_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    echo "${APT_TAG}: installing $* (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    # Wait for another apt user (an unattended upgrade, a parallel install) instead of failing.
    apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null \
        && apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "$@" >/dev/null \
        || status=$?
    if [ "$created_policy" = 1 ]; then
        rm -f "$policy"
        trap - EXIT
    fi
    if [ "$status" != 0 ]; then
        echo "${APT_TAG}: apt-get could not install $* (exit $status)" >&2
        exit 1
    fi
}
