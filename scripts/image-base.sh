#!/usr/bin/env bash
# Builds the runtime base image the Dockerfile names (`debian:bookworm-slim`)
# from Debian's own packages and tags it locally, for machines that reach
# Debian's mirror but no container registry: the same Dockerfile then builds
# here and anywhere else. A machine with a registry does not need this script.
#
#   debootstrap --variant=minbase bookworm from the mirror apt already uses
#   (/etc/apt/sources.list*), then `podman import` as debian:bookworm-slim.
#
# The root filesystem tarball is cached under target/image-base/ (gitignored,
# kept between runs): a second run on a machine that lost its podman images
# imports it in seconds. Exits 0 at once when the image already exists.
# The builder stage's rust:*-bookworm image is not built here: no Rust
# toolchain can be fetched into it (see the Dockerfile, "Two ways to build").
#
# Usage: scripts/image-base.sh [--rebuild]
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=debian:bookworm-slim
SUITE=bookworm
CACHE="${CARGO_TARGET_DIR:-$PWD/target}/image-base"
TARBALL="$CACHE/debian-$SUITE-minbase.tar"

rebuild=0
[ "${1:-}" = "--rebuild" ] && rebuild=1

if [ "$rebuild" = 0 ] && podman image exists "$TAG"; then
    echo "image-base: $TAG present" >&2
    exit 0
fi

# The first deb822 or one-line `deb` source of the main archive; Debian's
# default mirror when none is found.
mirror() {
    local uri
    uri=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -v security | head -n1 || true)
    [ -n "$uri" ] || uri=$(grep -hsE '^deb ' /etc/apt/sources.list 2>/dev/null \
        | awk '{print $2}' | grep -v security | head -n1 || true)
    echo "${uri:-http://deb.debian.org/debian}"
}

if [ "$rebuild" = 1 ] || [ ! -s "$TARBALL" ]; then
    scripts/container-tools.sh engine
    root="$CACHE/rootfs.$$"
    trap 'rm -rf "$root"' EXIT
    mkdir -p "$CACHE"
    rm -rf "$root"
    echo "image-base: debootstrap $SUITE from $(mirror) (a few minutes)" >&2
    debootstrap --variant=minbase "$SUITE" "$root" "$(mirror)" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
    # What a -slim image leaves out: the apt lists and caches, docs, man pages and
    # translations, now and (dpkg path-exclude, apt without its binary caches)
    # for every package a Dockerfile installs later, as Debian's own images do.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
        "$root"/var/cache/apt/archives/*.deb "$root"/usr/share/doc/* "$root"/usr/share/man/* \
        "$root"/usr/share/info/* "$root"/usr/share/locale/*
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-exclude /usr/share/man/*' \
        'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
        >"$root/etc/dpkg/dpkg.cfg.d/slim"
    printf '%s\n' 'Dir::Cache::pkgcache "";' 'Dir::Cache::srcpkgcache "";' \
        'APT::Install-Recommends "false";' >"$root/etc/apt/apt.conf.d/slim"
    tar -C "$root" --numeric-owner -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
fi
# PATH as Debian's images set it: `podman run` adds a default, `kube play` does not.
podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' "$TARBALL" "$TAG" >/dev/null
echo "image-base: imported $TAG ($(podman image inspect --format '{{.Size}}' "$TAG") bytes)" >&2
