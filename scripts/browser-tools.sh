#!/usr/bin/env bash
# Installs the headless browsers and WebDriver servers the console test
# (tests/it/console.rs) drives, when they are missing:
#   chromium  Debian's `chromium` and `chromium-driver` (/usr/bin/chromium,
#             /usr/bin/chromedriver).
#   firefox   Debian's `firefox-esr` (/usr/bin/firefox-esr) and geckodriver
#             GECKODRIVER_VERSION, which Debian does not package: built from
#             crates.io by `cargo install --locked` into $CARGO_HOME/bin
#             (~/.cargo/bin), kept there for every later run and work tree. The
#             first build takes minutes; progress is printed every 30 s.
#
# Usage: scripts/browser-tools.sh [chromium|firefox]...   (no argument: both)
#   For each browser asked, prints `<name>\t<browser binary>\t<driver binary>` on
#   stdout; progress goes to stderr. Runs as root on Debian; never starts a
#   daemon. Exits non-zero, saying why, when a tool is missing and cannot be
#   installed. The apt part shares check-tools.sh's lock (scripts/lib/apt.sh);
#   the geckodriver build has a lock of its own, so a minutes-long compile does
#   not hold up the apt users.
set -euo pipefail
APT_TAG=browser-tools
. "$(dirname "$0")/lib/apt.sh"

GECKODRIVER_VERSION=0.37.1
# The build normally takes a few minutes even on a busy 2-core machine.
GECKODRIVER_BUILD_TIMEOUT=1800
CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
GECKODRIVER="$CARGO_HOME/bin/geckodriver"

say() { echo "browser-tools: $*" >&2; }

browsers=("$@")
[ ${#browsers[@]} -gt 0 ] || browsers=(chromium firefox)
for b in "${browsers[@]}"; do
    case "$b" in
        chromium | firefox) ;;
        *) echo "usage: $0 [chromium|firefox]..." >&2; exit 2 ;;
    esac
done
wants() { [[ " ${browsers[*]} " == *" $1 "* ]]; }

# Debian's packages, under the lock every apt user of the project takes.
apt_lock
need=()
if wants chromium; then
    [ -x /usr/bin/chromium ] || need+=(chromium)
    [ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
fi
if wants firefox; then
    [ -x /usr/bin/firefox-esr ] || need+=(firefox-esr)
fi
if [ ${#need[@]} -gt 0 ]; then
    apt_install "${need[@]}"
    say "installed ${need[*]}"
fi
if wants chromium; then
    [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] \
        || { say "chromium or chromedriver still missing after the install"; exit 1; }
fi
if wants firefox; then
    [ -x /usr/bin/firefox-esr ] || { say "firefox-esr still missing after the install"; exit 1; }
fi
exec 9>&-

is_pinned_geckodriver() {
    local version
    [ -x "$GECKODRIVER" ] && version="$("$GECKODRIVER" --version 2>/dev/null)" || return 1
    [[ "${version%%$'\n'*}" =~ ^geckodriver\ ${GECKODRIVER_VERSION//./\\.}( |$) ]]
}

# geckodriver from crates.io: several tests may ask at once; one builds, the
# others wait here and find it built.
install_geckodriver() {
    exec 8>"${TMPDIR:-/tmp}/stockd-geckodriver.lock"
    flock 8
    if is_pinned_geckodriver; then
        exec 8>&-
        return
    fi
    local cargo build log pid status=0 start=$SECONDS last=$SECONDS
    cargo="$(command -v cargo || true)"
    [ -n "$cargo" ] || cargo="$CARGO_HOME/bin/cargo"
    if [ ! -x "$cargo" ]; then
        say "geckodriver is missing and cannot be built: no cargo on PATH or in $CARGO_HOME/bin"
        exit 1
    fi
    build="$(mktemp -d "${TMPDIR:-/tmp}/stockd-geckodriver-build.XXXXXX")"
    log="$build/cargo-install.log"
    trap 'rm -rf "$build"' EXIT
    say "building geckodriver ${GECKODRIVER_VERSION} from crates.io into $CARGO_HOME/bin (cargo install --locked; takes minutes)"
    # Own target dir: never the caller's CARGO_TARGET_DIR (a test's), and removed after.
    nice -n 19 timeout "$GECKODRIVER_BUILD_TIMEOUT" "$cargo" install --locked --force \
        --root "$CARGO_HOME" --target-dir "$build/target" \
        geckodriver --version "$GECKODRIVER_VERSION" >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if ((SECONDS - last >= 30)); then
            last=$SECONDS
            say "geckodriver build: $(grep -c '^ *Compiling ' "$log" || true) crates compiled in $((SECONDS - start)) s"
        fi
    done
    wait "$pid" || status=$?
    if [ "$status" != 0 ]; then
        tail -n 30 "$log" >&2
        if [ "$status" = 124 ]; then
            say "geckodriver build did not finish within ${GECKODRIVER_BUILD_TIMEOUT} s"
        else
            say "cargo install --locked geckodriver --version ${GECKODRIVER_VERSION} failed (exit $status; its last lines above)"
        fi
        exit 1
    fi
    is_pinned_geckodriver || { say "$GECKODRIVER is not geckodriver ${GECKODRIVER_VERSION} after the build"; exit 1; }
    say "built geckodriver ${GECKODRIVER_VERSION} in $((SECONDS - start)) s: $GECKODRIVER"
    rm -rf "$build"
    trap - EXIT
    exec 8>&-
}

if wants firefox; then
    install_geckodriver
fi
if wants chromium; then
    say "chromium and chromedriver present"
    printf 'chromium\t/usr/bin/chromium\t/usr/bin/chromedriver\n'
fi
if wants firefox; then
    say "firefox-esr and geckodriver ${GECKODRIVER_VERSION} present"
    printf 'firefox\t/usr/bin/firefox-esr\t%s\n' "$GECKODRIVER"
fi
