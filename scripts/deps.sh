#!/usr/bin/env bash
# Checks (and, as root, installs) what SHIFT-Go's build and test tiers need on Debian 12
# (`deps.sh demo`: what make demo needs).
# Idempotent: installs only missing packages, and runs apt-get update only when it must.
# Non-root: prints what is missing and the command to install it, and exits 0 so that the
# test tiers that need those packages skip with their own reason.
set -euo pipefail

GO_MIN=${GO_MIN:-1.26}
PACKAGES=(linux-libc-dev libibverbs-dev ibverbs-providers ibverbs-utils perftest
  qemu-system-x86 busybox-static cpio xz-utils bc iproute2 tshark redis-server clang llvm gcc)
# `deps.sh demo` (make demo): only what the demo needs, the plugin's build (gcc,
# libibverbs-dev) and the unmodified program it runs (perftest) in namespaces (iproute2).
if [ "${1:-}" = demo ]; then
  PACKAGES=(gcc libibverbs-dev perftest iproute2)
fi

# Go: the module needs GO_MIN or newer.
GO=${GO:-go}
if ! command -v "$GO" >/dev/null; then
  echo "deps: no '$GO' in PATH; install Go >= $GO_MIN (https://go.dev/dl/) and add it to PATH" >&2
  exit 1
fi
gover=$("$GO" env GOVERSION) || { echo "deps: $GO env GOVERSION failed" >&2; exit 1; }  # e.g. go1.26.8, go1.27rc1, devel go1.27-abcdef
v=$(sed -nE 's/.*go([0-9]+)\.([0-9]+).*/\1 \2/p' <<<"$gover")
if [ -z "$v" ]; then echo "deps: cannot read a Go version from '$gover'" >&2; exit 1; fi
read -r maj min <<<"$v"
want_maj=${GO_MIN%%.*}; want_min=${GO_MIN#*.}
if (( maj < want_maj || (maj == want_maj && min < want_min) )); then
  echo "deps: $gover is too old: this module needs Go >= $GO_MIN" >&2
  exit 1
fi
echo "deps: $gover (>= $GO_MIN) ok"

if ! command -v dpkg-query >/dev/null; then
  echo "deps: not a Debian system; install the equivalents of: ${PACKAGES[*]}"
  exit 0
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo "deps: all ${#PACKAGES[@]} Debian packages present"
  exit 0
fi
if (( EUID != 0 )); then
  echo "deps: missing Debian packages: ${missing[*]}"
  echo "deps: install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}"
  echo "deps: (tests that need them will skip, saying why)"
  exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Try without an update first (fast when the lists are fresh), then update and retry. Wait
# for the dpkg lock rather than fail when another apt is running.
if ! apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"; then
  apt-get -o DPkg::Lock::Timeout=600 update -q
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
fi
