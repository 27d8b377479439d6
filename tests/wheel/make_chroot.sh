#!/usr/bin/env bash
# Makes (once, then cached) a minimal Debian root file system for the clean-machine wheel test:
# debootstrap's minbase (which includes the OS tz database, tzdata) plus python3 and python3-venv.
# No compiler, no -dev packages. Usage: tests/wheel/make_chroot.sh DIR
#
# Safe to run twice at once (`make test` starts it in the background and the test calls it too):
# a lock serialises the two, and the second finds the finished root. The root is made in
# DIR.partial and renamed when complete, so an interrupted run never leaves a half root behind.
set -euo pipefail
root=${1:?usage: make_chroot.sh DIR}
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9
[ "$(id -u)" = 0 ] || { echo "make_chroot.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
if ! command -v debootstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
# The mirror and release this machine's apt uses (deb822 or one-line sources).
mirror=$(grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ \
         2>/dev/null | head -1 | tr -d ' ' || true)
mirror=${mirror:-http://deb.debian.org/debian}
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$root/.complete" ]; then
  tmp="$root.partial"
  # Never rm -rf a tree something is still mounted in (a killed test's /proc, say).
  if [ -d "$tmp" ] && grep -q " $(realpath "$tmp")/" /proc/mounts; then
    echo "make_chroot.sh: $tmp has mounts; unmount them first" >&2; exit 2
  fi
  rm -rf "$tmp"
  start=$(date +%s)
  debootstrap --variant=minbase --include=python3,python3-venv "$suite" "$tmp" "$mirror" \
    > "$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
  cp /etc/resolv.conf "$tmp/etc/resolv.conf"  # pip inside resolves PyPI like the host does
  rm -f "$tmp"/var/cache/apt/archives/*.deb
  touch "$tmp/.complete"
  rm -rf "$root"
  mv "$tmp" "$root"
  echo "make_chroot.sh: $suite root from $mirror in $root ($(( $(date +%s) - start )) s)"
fi

# This machine's network set-up for pip: its CA bundle (a TLS-inspecting egress proxy signs PyPI's
# certificates here) goes in as /etc/ssl/certs/host-ca.crt, and the test points PIP_CERT at it.
ca=${PIP_CERT:-${SSL_CERT_FILE:-}}
if [ -n "$ca" ] && [ -f "$ca" ]; then mkdir -p "$root/etc/ssl/certs"; cp "$ca" "$root/etc/ssl/certs/host-ca.crt"; fi
# Download backfill's runtime dependencies (pyproject.toml's) from PyPI into the root's wheelhouse
# /var/cache/backfill-wheels, here in the background: the test's `pip install` of the wheel then
# takes them from there (--no-index) instead of waiting on the network. Cheap when cached.
start=$(date +%s)
deps=$(python3 -c 'import sys, tomllib; print(" ".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' "$here/../../pyproject.toml")
stamp="$root/var/cache/backfill-wheels/.deps"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$deps" ]; then exit 0; fi
[ -x "$root/opt/warm/bin/pip" ] || chroot "$root" /usr/bin/python3 -m venv /opt/warm
# shellcheck disable=SC2086  # deps are one word each
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
  ${ca:+PIP_CERT=/etc/ssl/certs/host-ca.crt} PIP_CACHE_DIR=/var/cache/backfill-pip \
  /opt/warm/bin/pip download -q --disable-pip-version-check -d /var/cache/backfill-wheels $deps
echo "$deps" > "$stamp"
echo "make_chroot.sh: wheelhouse has: $deps ($(( $(date +%s) - start )) s)"
