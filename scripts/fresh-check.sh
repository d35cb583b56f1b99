#!/usr/bin/env bash
# fresh-check.sh is `make fresh-check`: it runs `make demo` from a clone of
# the current commit on a bare Debian 12 (debootstrap --variant=minbase
# bookworm, plus make to type the command) with only the Go toolchain of
# this machine copied in, in a chroot. It shows that scripts/install-deps.sh
# installs everything the first command needs on a fresh machine.
#
# Run it as root (debootstrap, mount, chroot). The bare root filesystem is
# cached as a tarball in $FRESH_CHECK_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/invledger-fresh-check), with the Debian
# packages that install-deps.sh downloads: a second run skips debootstrap
# and the downloads, and still starts from the bare system. Go modules come
# from this machine's module download cache, then from its GOPROXY.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) -ne 0 ]]; then
  echo "fresh-check: run as root: it uses debootstrap, mount and chroot" >&2
  exit 1
fi
SECONDS=0
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${FRESH_CHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/invledger-fresh-check}
tarball=$cache/bookworm-minbase-make.tar.gz
mkdir -p "$cache/apt-archives/partial"

commit=$(git rev-parse HEAD)
if [[ -n $(git status --porcelain) ]]; then
  echo "fresh-check: the tree has uncommitted changes; checking commit $commit without them" >&2
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
if [[ ! -f $tarball ]]; then
  echo "fresh-check: debootstrap --variant=minbase bookworm from $mirror (cached in $tarball)" >&2
  build=$(mktemp -d /var/tmp/invledger-debootstrap.XXXXXX)
  trap 'rm -rf "$build"' EXIT
  debootstrap --variant=minbase --include=make bookworm "$build" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
  tar --numeric-owner -C "$build" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$build"
  trap - EXIT
  echo "fresh-check: root filesystem ready at ${SECONDS}s" >&2
fi

root=$(mktemp -d /var/tmp/invledger-fresh.XXXXXX)
mounts=()
cleanup() {
  # Whatever the demo left running in the chroot (it should leave nothing:
  # its servers die with it) would keep the mounts busy.
  for p in /proc/[0-9]*; do
    if [[ $(readlink "$p/root" 2>/dev/null) == "$root" ]]; then kill -KILL "${p#/proc/}" 2>/dev/null || true; fi
  done
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[i]}" 2>/dev/null || umount -R -l "${mounts[i]}" || true
  done
  if findmnt -R "$root" >/dev/null 2>&1; then
    echo "fresh-check: $root still has mounts; not removing it" >&2
  else
    rm -rf "$root"
  fi
}
trap cleanup EXIT
bind() { # bind SRC DST [ro]
  mkdir -p "$2"
  mount --rbind "$1" "$2"
  mount --make-rslave "$2"
  mounts+=("$2")
  if [[ ${3:-} == ro ]]; then mount -o remount,bind,ro "$2"; fi
}

tar --numeric-owner -C "$root" -xzf "$tarball"
chmod 755 "$root" # it is / in the chroot (mktemp made it 0700): apt's _apt and postgres must traverse it
cp -a "$(go env GOROOT)/." "$root/usr/local/go"
git clone -q --no-hardlinks "$PWD" "$root/root/invledger"
git -C "$root/root/invledger" checkout -q --detach "$commit"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Package installs in a chroot share this machine's network: Debian's
# redis-server, postgresql and prometheus would start their services on
# the default ports, where this machine's own may listen.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

mount -t proc proc "$root/proc"
mounts+=("$root/proc")
bind /dev "$root/dev"
bind "$cache/apt-archives" "$root/var/cache/apt/archives"
modcache=$(go env GOMODCACHE)/cache/download
bind "$modcache" "$root/var/cache/host-go-modules" ro

echo "fresh-check: make demo at $commit on bare Debian 12 in $root (setup took ${SECONDS}s)" >&2
start=$SECONDS
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  GOPROXY="file:///var/cache/host-go-modules,$(go env GOPROXY)" \
  /bin/sh -c 'cd /root/invledger && make demo'
echo "fresh-check: passed: make demo took $((SECONDS - start))s on bare Debian 12, ${SECONDS}s in all" >&2
