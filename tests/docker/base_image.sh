#!/usr/bin/env bash
# Puts the Debian 12 base images that the Dockerfile's FROM lines name
# (docker.io/library/debian:12 and :12-slim) into the containers storage that
# $CONTAINERS_STORAGE_CONF selects, without any registry: a minbase
# debootstrap, packed as a tarball and imported. The tarball is cached, so a
# rerun imports it again without a debootstrap.
#
#   tests/docker/base_image.sh CACHE_DIR
#
# The base's apt uses the same Debian mirror and Acquire settings as this
# machine's apt (a package proxy, or a dated snapshot whose Release files have
# expired, works inside the build as it does here). Both tags are one image:
# the runtime stage's slimness is the Dockerfile's business, not the base's.
set -euo pipefail
cache_dir=$1
suite=bookworm
# -2: the base with the apt and dpkg settings below; a cached first one is
# made anew.
tarball=$cache_dir/debian-12-$suite-minbase-2-$(dpkg --print-architecture).tar

# The host's Debian sources: the deb822 file Debian 12 ships, else the
# one-line entries of sources.list.
host_sources() {
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    cat /etc/apt/sources.list.d/debian.sources
  elif [ -f /etc/apt/sources.list ]; then
    grep -E '^deb .*/debian(-security)?/? ' /etc/apt/sources.list || true
  fi
}

# The mirror debootstrap uses: the first Debian archive (not -security) the
# host's apt names.
host_mirror() {
  host_sources | grep -v '^#' | grep -oE 'https?://[^ ]*/debian/?( |$)' | tr -d ' ' | head -n1
}

work=
cleanup() {
  [ -n "$work" ] || return 0
  # debootstrap mounts proc and sys inside the target; a failed run may leave
  # them there, and rm must not walk into them.
  findmnt -rn -o TARGET | grep "^$work/" | sort -r | xargs -r umount -l || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

make_tarball() {
  local mirror rootfs
  mirror=$(host_mirror)
  mirror=${mirror:-http://deb.debian.org/debian}
  work=$(mktemp -d "$cache_dir/debootstrap.XXXXXX")
  rootfs=$work/rootfs
  echo "base: debootstrap --variant=minbase $suite from $mirror"
  debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log" >&2; echo "base: debootstrap failed" >&2; return 1; }

  local sources=$(host_sources)
  if [ -n "$sources" ]; then
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      printf '%s\n' "$sources" >"$rootfs/etc/apt/sources.list.d/debian.sources"
      rm -f "$rootfs/etc/apt/sources.list"
    else
      printf '%s\n' "$sources" >"$rootfs/etc/apt/sources.list"
    fi
  fi
  # Acquire settings that decide whether apt reaches the archive at all.
  apt-config dump | grep -E '^Acquire::(Check-Valid-Until|Check-Date|https?::Proxy) ' \
    >"$rootfs/etc/apt/apt.conf.d/99host-acquire" || true
  # As in Debian's own images: dpkg skips its fsyncs (a build that dies is
  # built again, never recovered) and apt fetches no translations.
  echo force-unsafe-io >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  # The build environment provides these; a base carries none of its maker's.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  : >"$rootfs/etc/resolv.conf"
  : >"$rootfs/etc/hostname"

  tar -C "$rootfs" --numeric-owner --xattrs -cf "$work/base.tar" .
  mv "$work/base.tar" "$tarball"
}

mkdir -p "$cache_dir"
if [ -s "$tarball" ]; then
  echo "base: cached $tarball"
else
  make_tarball
fi
podman import --quiet --change 'CMD ["bash"]' "$tarball" docker.io/library/debian:12 >/dev/null
podman tag docker.io/library/debian:12 docker.io/library/debian:12-slim
echo "base: docker.io/library/debian:12 and :12-slim imported"
