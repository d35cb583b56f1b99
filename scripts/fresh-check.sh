#!/usr/bin/env bash
# fresh-check.sh is `make fresh-check`: it runs `make demo` from a clone of
# the current commit in a chroot, twice, each time on a fresh copy of a bare
# Debian 12 (debootstrap --variant=minbase bookworm, plus make to type the
# command) with only the Go toolchain of this machine copied in:
#
#   1. as root on the bare system: scripts/install-deps.sh installs
#      everything the first command needs on a fresh machine;
#   2. as a user without root or sudo, on the bare system plus redis-server,
#      postgresql and ca-certificates: `make demo` installs nothing more
#      (install-deps would fail, having no way to install) and passes.
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

root=""
mounts=()
cleanup() {
  [[ -n $root ]] || return 0
  # Whatever the demo left running in the chroot (it should leave nothing:
  # its servers die with it) would keep the mounts busy.
  for p in /proc/[0-9]*; do
    if [[ $(readlink "$p/root" 2>/dev/null) == "$root" ]]; then kill -KILL "${p#/proc/}" 2>/dev/null || true; fi
  done
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[i]}" 2>/dev/null || umount -R -l "${mounts[i]}" || true
  done
  mounts=()
  if findmnt -R "$root" >/dev/null 2>&1; then
    echo "fresh-check: $root still has mounts; not removing it" >&2
  else
    rm -rf "$root"
  fi
  root=""
}
trap cleanup EXIT
bind() { # bind SRC DST [ro]
  mkdir -p "$2"
  mount --rbind "$1" "$2"
  mount --make-rslave "$2"
  mounts+=("$2")
  if [[ ${3:-} == ro ]]; then mount -o remount,bind,ro "$2"; fi
}
# in_chroot USER COMMAND runs COMMAND with sh in the chroot as USER, with a
# clean environment, Go on PATH and the module cache of this machine first.
in_chroot() {
  local home=/root
  [[ $1 == root ]] || home=/home/$1
  chroot --userspec="$1:$1" "$root" /usr/bin/env -i HOME="$home" TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    GOPROXY="file:///var/cache/host-go-modules,$(go env GOPROXY)" \
    /bin/sh -c "$2"
}
# demo_in_chroot USER PACKAGES: make demo as USER on a fresh copy of the
# bare system with PACKAGES installed first (as root); it prints the demo's
# output and fails when the demo does.
demo_in_chroot() {
  local user=$1 packages=$2 home=/root
  root=$(mktemp -d /var/tmp/invledger-fresh.XXXXXX)
  tar --numeric-owner -C "$root" -xzf "$tarball"
  chmod 755 "$root" # it is / in the chroot (mktemp made it 0700): apt's _apt and postgres must traverse it
  cp -a "$(go env GOROOT)/." "$root/usr/local/go"
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
  bind "$(go env GOMODCACHE)/cache/download" "$root/var/cache/host-go-modules" ro
  if [[ -n $packages ]]; then
    in_chroot root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >/dev/null"
  fi
  if [[ $user != root ]]; then
    home=/home/$user
    chroot "$root" useradd --create-home --shell /bin/sh "$user"
  fi
  git clone -q --no-hardlinks "$PWD" "$root$home/invledger"
  git -C "$root$home/invledger" checkout -q --detach "$commit"
  chroot "$root" chown -R "$user:$user" "$home/invledger"
  echo "fresh-check: make demo at $commit as $user on bare Debian 12${packages:+ with $packages} (setup took ${SECONDS}s)" >&2
  local start=$SECONDS
  in_chroot "$user" "cd $home/invledger && make demo" 2>&1 | tee "$cache/demo-$user.log"
  echo "fresh-check: make demo as $user took $((SECONDS - start))s" >&2
  cleanup
}

demo_in_chroot root ""
demo_in_chroot newcomer "redis-server postgresql ca-certificates"
if grep -q "install-deps: installing" "$cache/demo-newcomer.log"; then
  echo "fresh-check: failed: make demo installed packages where Redis, PostgreSQL and ca-certificates were present" >&2
  exit 1
fi
echo "fresh-check: passed: make demo on bare Debian 12, and, installing nothing, as a user without root where Redis and PostgreSQL were installed (${SECONDS}s in all)" >&2
