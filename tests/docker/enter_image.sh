#!/usr/bin/env bash
# Runs a command from an image's mounted root filesystem the way a container
# runtime would: its own /proc, read-only /sys, a /dev with only the usual
# devices, a fresh /tmp, the given volumes bound in, then chroot as the
# image's user (no supplementary groups, so no group 0 left over from root),
# an environment of exactly the image's variables, in its working directory.
# Every mount is made inside the caller's `unshare --mount` namespace, so all
# of them vanish with the process, however it ends.
#
#   unshare --mount --propagation private [--pid --fork --kill-child] -- \
#     enter_image.sh ROOT UID:GID WORKDIR ENV_FILE VOLUMES_FILE COMMAND [ARG...]
#
# ENV_FILE: NAME=VALUE lines; VOLUMES_FILE: "HOST_DIR IMAGE_DIR" lines.
set -euo pipefail
root=$1 ids=$2 workdir=$3 env_file=$4 volumes_file=$5
shift 5

mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
mount -t tmpfs -o nosuid,mode=755 tmpfs "$root/dev"
for device in null zero full random urandom tty; do
  touch "$root/dev/$device"
  mount --bind "/dev/$device" "$root/dev/$device"
done
mkdir "$root/dev/shm"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/dev/shm"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/tmp"
while read -r host_dir image_dir; do
  mount --bind "$host_dir" "$root$image_dir"
done <"$volumes_file"

readarray -t environment <"$env_file"
exec chroot --userspec="$ids" --groups="${ids#*:}" "$root" \
  /usr/bin/env -i --chdir="$workdir" "${environment[@]}" "$@"
