#!/usr/bin/env bash
# What the built image declares and holds, read back from the image itself:
# an exec-form entry point running linserve on 0.0.0.0 with the exposed
# ports, a store under a declared volume, a non-root user, SIGTERM as stop
# signal, a health check through linserve-client, OPENBLAS_NUM_THREADS=1; the
# model and the binaries present, OpenBLAS behind libblas.so.3, and no
# compiler, no -dev package, no headers and no build tree.
#
#   tests/docker/check_image.sh IMAGE   (with the test's CONTAINERS_STORAGE_CONF)
set -euo pipefail
image=$1

failures=0
check() {  # check DESCRIPTION COMMAND...
  if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1" >&2; failures=$((failures + 1)); fi
}
config() { podman image inspect --format "{{json .Config.$1}}" "$image"; }
entry_arg() { config Entrypoint | jq -r --arg f "--$1=" '.[] | select(startswith($f)) | ltrimstr($f)' | tail -n1; }

echo "image: $(podman image inspect --format '{{.Size}}' "$image") bytes"
config Entrypoint | jq -c .

check "exec-form entry point runs /usr/local/bin/linserve itself" \
  test "$(config Entrypoint | jq -r '.[0]')" = /usr/local/bin/linserve
check "gRPC listens on 0.0.0.0:50051" test "$(entry_arg listen)" = 0.0.0.0:50051
check "HTTP listens on 0.0.0.0:8080" test "$(entry_arg http_listen)" = 0.0.0.0:8080
check "the health port listens on 0.0.0.0:8081" test "$(entry_arg health_listen)" = 0.0.0.0:8081
check "metrics on 0.0.0.0:9464" \
  test "$(entry_arg metrics_host):$(entry_arg metrics_port)" = 0.0.0.0:9464
check "ports 50051, 8080, 8081 and 9464 exposed" \
  test "$(config ExposedPorts | jq -r 'keys | sort | join(",")')" = "50051/tcp,8080/tcp,8081/tcp,9464/tcp"
store_dir=$(entry_arg store_dir)
check "--store_dir ($store_dir) lies in a declared volume" \
  test -n "$(config Volumes | jq -r --arg d "$store_dir" \
               'keys[] | select(. as $v | $d == $v or ($d | startswith($v + "/")))')"
check "stop signal SIGTERM" test "$(config StopSignal | jq -r .)" = SIGTERM
check "OPENBLAS_NUM_THREADS=1 in the environment" \
  test "$(config Env | jq -r '.[] | select(startswith("OPENBLAS_NUM_THREADS="))')" = OPENBLAS_NUM_THREADS=1
check "health check is exec-form linserve-client health" \
  test "$(config Healthcheck | jq -r '.Test[0:3] | join(" ")')" = "CMD /usr/local/bin/linserve-client health"

root=$(podman image mount "$image")
trap 'podman image unmount "$image" >/dev/null' EXIT

user=$(config User | jq -r .)
uid=$(awk -F: -v u="${user%%:*}" '$1 == u || $3 == u { print $3; exit }' "$root/etc/passwd")
check "runs as a non-root user ($user, uid ${uid:-unknown})" test -n "$uid" -a "${uid:-0}" != 0

model=$(entry_arg model)
check "model $model present" test -s "$root$model/config.json" -a -s "$root$model/model.safetensors"
for binary in /usr/local/bin/linserve /usr/local/bin/linserve-client /usr/local/bin/linserve-quantize; do
  check "$binary present" test -x "$root$binary"
done
check "OpenBLAS backs libblas.so.3" \
  grep -q openblas <<<"$(readlink "$root/etc/alternatives/libblas.so.3-x86_64-linux-gnu")"

for tool in gcc g++ c++ cc cpp clang clang++ cmake ninja make ccache; do
  check "no $tool" test ! -e "$root/usr/bin/$tool"
done
for headers in torch grpcpp google/protobuf absl c++; do
  check "no /usr/include/$headers" test ! -e "$root/usr/include/$headers"
done
dev_packages=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package} ${db:Status-Status}\n' |
                 awk '$2 == "installed" && ($1 ~ /-dev$/ || $1 ~ /^(gcc|g\+\+|cpp)(-[0-9]+)?$/) { print $1 }')
check "no -dev or compiler package installed${dev_packages:+: }$(echo $dev_packages)" test -z "$dev_packages"
check "no build tree (/src)" test ! -e "$root/src"

[ "$failures" -eq 0 ] || { echo "FAIL: $failures image checks" >&2; exit 1; }
