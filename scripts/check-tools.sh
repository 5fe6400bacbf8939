#!/usr/bin/env bash
# Installs the validators the deploy tests need when they are missing:
# promtool (Debian package `prometheus`) and systemd-analyze (package `systemd`).
# Runs as root on Debian; never starts a daemon (a temporary policy-rc.d forbids
# service starts during the install). Prints what it did; exits non-zero only
# when a tool is missing and cannot be installed.
set -euo pipefail
APT_TAG=check-tools
. "$(dirname "$0")/lib/apt.sh"

# Several tests call this at once: one installs, the others wait and re-check.
apt_lock

need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
if [ ${#need[@]} -eq 0 ]; then
    echo "check-tools: promtool and systemd-analyze present"
    exit 0
fi
apt_install "${need[@]}"
command -v promtool >/dev/null && command -v systemd-analyze >/dev/null
echo "check-tools: installed ${need[*]}"
