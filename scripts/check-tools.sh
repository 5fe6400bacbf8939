#!/usr/bin/env bash
# Installs the validators the deploy tests need when they are missing:
# promtool (Debian package `prometheus`) and systemd-analyze (package `systemd`).
# Runs as root on Debian; never starts a daemon (a temporary policy-rc.d forbids
# service starts during the install). Prints what it did; exits non-zero only
# when a tool is missing and cannot be installed.
set -euo pipefail

# Several tests call this at once: one installs, the others wait and re-check.
exec 9>"${TMPDIR:-/tmp}/stockd-check-tools.lock"
flock 9

need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
if [ ${#need[@]} -eq 0 ]; then
    echo "check-tools: promtool and systemd-analyze present"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "check-tools: missing ${need[*]} and cannot install (need root and apt-get)" >&2
    exit 1
fi
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod +x "$policy"
    created_policy=1
fi
trap '[ "$created_policy" = 1 ] && rm -f "$policy"' EXIT
echo "check-tools: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt user (an unattended upgrade, a parallel install) instead of failing.
apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${need[@]}" >/dev/null
command -v promtool >/dev/null && command -v systemd-analyze >/dev/null
echo "check-tools: installed ${need[*]}"
