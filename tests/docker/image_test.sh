#!/usr/bin/env bash
# The real image, built from the Dockerfile and run without a Docker engine:
# buildah builds it (chroot isolation) on a Debian 12 base made here by
# debootstrap; then the image's own entry point runs from its mounted root
# filesystem under chroot, as the image's user, with the image's environment
# and working directory, as PID 1 of its own PID namespace, and is checked
# through the image's own client: health, a Generate, a session written to
# the volume, /metrics, and SIGTERM -> exit 0. Also checked: the runtime
# image holds no compiler or -dev package, and its metadata (user, ports,
# volume, stop signal, health check).
#
#   tests/docker/image_test.sh SOURCE_DIR WORK_DIR
#
# Needs root (debootstrap, mounts, chroot), podman, buildah and debootstrap
# (scripts/setup installs them); exits 77 (skipped) when podman or buildah is
# missing. The containers storage lives in WORK_DIR and is removed at the end
# (LINSERVE_DOCKER_KEEP=1 keeps it, the image and the build's layers for the
# next run); the Debian base tarball is cached in ~/.cache/linserve
# (LINSERVE_CACHE_DIR), so only the first run debootstraps. The build stage's compiler cache is this machine's ccache
# directory, so the image build reuses what the checkout's build compiled.
set -euo pipefail

src=$(cd "$1" && pwd)
work=$(mkdir -p "$2" && cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cache_dir=${LINSERVE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/linserve}
image=localhost/linserve:image-test

fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in podman buildah; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/setup installs it)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, mounts, chroot); skip it with ctest -LE docker"

started=$SECONDS
# free_space: what the work folder's file system has left; the build needs
# ~6 GB (the build stage's packages and tree, the runtime layer twice).
free_space() { df -h --output=avail,size "$work" | tail -n1 | awk '{ print $1 " of " $2 }'; }
# timed NAME COMMAND...: runs one phase and says how long it took.
timed() {
  local start=$SECONDS
  echo "--- $1"
  "${@:2}"
  echo "--- $1: $((SECONDS - start)) s"
}

# --- A containers storage of the test's own, not the machine's.
unmount_under() {
  findmnt -rn -o TARGET | grep "^$1/" | sort -r | xargs -r umount -l || true
}
keep=${LINSERVE_DOCKER_KEEP:-0}
unmount_under "$work"
if [ "$keep" != 1 ]; then rm -rf --one-file-system "$work/storage" "$work/tmp"; fi
rm -rf --one-file-system "$work/run"
mkdir -p "$work/storage" "$work/tmp" "$work/run"
# Everything the test says is also kept beside the build log: ctest's own
# log of it is overwritten by the next ctest run in the same build folder.
exec > >(tee "$work/run/test.log") 2>&1
# Kernel overlayfs when this machine can mount it, else the slower vfs copy.
driver=vfs
mkdir -p "$work/tmp/probe/"{lower,upper,work,merged}
if mount -t overlay overlay -o "lowerdir=$work/tmp/probe/lower,upperdir=$work/tmp/probe/upper,workdir=$work/tmp/probe/work" \
     "$work/tmp/probe/merged" 2>/dev/null; then
  umount "$work/tmp/probe/merged"
  driver=overlay
fi
rm -rf "$work/tmp/probe"
cat >"$work/storage.conf" <<EOF
[storage]
driver = "$driver"
graphroot = "$work/storage/graph"
runroot = "$work/storage/run"
EOF
export CONTAINERS_STORAGE_CONF=$work/storage.conf
# buildah keeps RUN --mount=type=cache directories under TMPDIR/buildah-cache.
export TMPDIR=$work/tmp

build_session=
cleanup() {
  local rc=$?
  set +e
  # A RUN step's processes outlive a killed buildah; they are all in the
  # session it was started in.
  if [ -n "$build_session" ]; then pkill -KILL -s "$build_session"; fi
  podman image unmount --all >/dev/null 2>&1
  unmount_under "$work"
  if [ "$keep" = 1 ]; then
    echo "kept: CONTAINERS_STORAGE_CONF=$CONTAINERS_STORAGE_CONF podman image inspect $image"
  else
    rm -rf --one-file-system "$work/storage" "$work/tmp"
  fi
  echo "total: $((SECONDS - started)) s"
  exit "$rc"
}
trap cleanup EXIT

# --- The base images, the build, the checks.
# ccache_counts: "HITS MISSES" of this machine's compiler cache, which the
# image's build stage shares.
ccache_counts() {
  ccache --print-stats 2>/dev/null | awk '
    $1 ~ /^(direct|preprocessed)_cache_hit$/ { hits += $2 } $1 == "cache_miss" { misses += $2 }
    END { print hits + 0, misses + 0 }'
}
build_image() {
  local ccache_dir layers=false
  ccache_dir=$(ccache --get-config cache_dir 2>/dev/null || true)
  if [ -n "$ccache_dir" ]; then
    mkdir -p "$ccache_dir" "$TMPDIR/buildah-cache"
    ln -sfn "$ccache_dir" "$TMPDIR/buildah-cache/linserve-ccache"
  fi
  local counts_before
  counts_before=$(ccache_counts)
  # Kept storage keeps the layers too, so a rerun rebuilds only what changed.
  if [ "$keep" = 1 ]; then layers=true; fi
  # The build stage works at the checkout's own path (the Dockerfile's
  # LINSERVE_SRC_DIR), so its precompiled headers and the units loading them
  # are cache hits: at another path each would compile anew. Each log line
  # carries the seconds since the build started, to see where its time goes.
  #
  # A RUN step re-executes buildah from a sealed in-memory copy of itself when
  # it cannot bind-mount its own binary. On a loaded machine the kernel may
  # refuse that seal for a moment (EBUSY: pages of the copy still pinned), and
  # the step fails before running anything. That failure, and only it, is
  # tried again, at most twice; every other failure fails the test at once.
  local attempt
  for attempt in 1 2 3; do
    setsid bash -c 'set -o pipefail; buildah bud "$@" 2>&1 | while IFS= read -r line; do
                      printf "[%4d s] %s\n" "$SECONDS" "$line"; done' build \
      --isolation chroot --pull=never --format docker --layers="$layers" --force-rm \
      --build-arg LINSERVE_SRC_DIR="$src" \
      -t "$image" -f "$src/Dockerfile" "$src" >"$work/run/build.log" &
    build_session=$!
    if wait "$build_session"; then
      break
    fi
    build_session=
    if [ "$attempt" -lt 3 ] && grep -q 'sealing memfd copy: Device or resource busy' "$work/run/build.log"; then
      echo "build attempt $attempt: the kernel refused to seal buildah's re-exec copy (EBUSY); building again"
      continue
    fi
    tail -n 60 "$work/run/build.log" >&2
    echo "free: $(free_space)" >&2
    fail "the image does not build (whole log: $work/run/build.log)"
  done
  build_session=
  grep -E 'STEP [0-9]+/[0-9]+:|COMMIT' "$work/run/build.log" | cut -c1-120 || true
  if [ -n "$ccache_dir" ]; then
    echo "compiler cache in the build stage: $(ccache_counts | awk -v before="$counts_before" '
      BEGIN { split(before, b) } { print $1 - b[1] " hits, " $2 - b[2] " misses" }')"
  fi
}

echo "free: $(free_space)"
timed "base images" "$here/base_image.sh" "$cache_dir"
timed "image build" build_image
timed "image checks" "$here/check_image.sh" "$image"
timed "run" "$here/run_image.sh" "$image" "$work/run"
echo "PASS"
