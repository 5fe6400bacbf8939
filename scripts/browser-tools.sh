#!/usr/bin/env bash
# Installs the headless browser the console test drives when it is missing:
# Debian's `chromium` and `chromium-driver` (/usr/bin/chromium,
# /usr/bin/chromedriver). Runs as root on Debian; never starts a daemon. Prints
# what it did; exits non-zero only when a tool is missing and cannot be
# installed. Serialized with check-tools.sh: both run apt-get.
set -euo pipefail

# Several tests (and check-tools.sh) may call at once: one installs, the others wait.
exec 9>"${TMPDIR:-/tmp}/stockd-check-tools.lock"
flock 9

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
if [ ${#need[@]} -eq 0 ]; then
    echo "browser-tools: chromium and chromedriver present"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "browser-tools: missing ${need[*]} and cannot install (need root and apt-get)" >&2
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
echo "browser-tools: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt user (an unattended upgrade, a parallel install) instead of failing.
apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${need[@]}" >/dev/null
[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]
echo "browser-tools: installed ${need[*]}"
