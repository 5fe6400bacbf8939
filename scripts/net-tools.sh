#!/usr/bin/env bash
# Installs what the chaos suite's network partitions need when it is missing:
# `ip` (Debian package iproute2: namespaces, veth pairs, a bridge) and `nft`
# (package nftables: the DROP rules that cut a link, and the random drop of a
# flapping one). tests/chaos/net/ runs it once per test process before its
# first namespace. Runs as root on Debian; never starts a daemon (a temporary
# policy-rc.d forbids service starts during the install). Exits non-zero,
# saying why, only when a tool is missing and cannot be installed.
set -euo pipefail
APT_TAG=net-tools
. "$(dirname "$0")/lib/apt.sh"

# Several test processes may call this at once: one installs, the others wait.
apt_lock

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nft >/dev/null 2>&1 || need+=(nftables)
if [ ${#need[@]} -eq 0 ]; then
    echo "net-tools: ip and nft present"
    exit 0
fi
apt_install "${need[@]}"
command -v ip >/dev/null && command -v nft >/dev/null
echo "net-tools: installed ${need[*]}"
