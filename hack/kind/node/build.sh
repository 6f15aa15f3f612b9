#!/usr/bin/env bash
# Assembles a kind node image on a machine that reaches no container registry, from Debian packages
# and programs built from Go modules, and caches it by version:
#
#   hack/kind/node/build.sh [KUBE_VERSION]    prints the image name, servicecidr-guard.local/kind-node:<version>
#   FORCE=1 hack/kind/node/build.sh           rebuild even if the cached image is current
#
# `kind build node-image` cannot work here: it pulls every image the Kubernetes build does not
# produce. What kind itself needs of a node image (read from kind v0.33's source) is small: systemd
# as PID 1 behind an entrypoint that prints "detected cgroup v1"; /kind/version; kubeadm, kubectl,
# crictl, ctr and containerd on PATH; containerd's CRI socket at /run/containerd/containerd.sock
# with a version 2 config naming its snapshotter (`kind load docker-image` reads it); every image
# `kubeadm init` will run already in containerd's k8s.io namespace; /kind/manifests/default-storage.yaml.
# With networking.disableDefaultCNI (hack/kind/config-offline.yaml) kind installs no CNI, so the
# image carries a static CNI configuration instead of kindnetd (whose image no registry here serves).
#
# Steps:
#   1. hack/kind/node/binaries.sh: kubelet, kubeadm, kubectl, crictl, and the binaries of the images
#   2. mmdebstrap: Debian (bookworm, with its updates and security suites) with systemd, containerd,
#      runc, containernetworking-plugins, iptables, conntrack; then this directory's files/
#      (entrypoint, units, containerd and CNI configuration, kind's manifests), the binaries, and
#      /kind/version; systemd units enabled and masked (below); `docker import` as the base
#   3. hack/kind/node/images.sh: the images kubeadm asks for, in one archive
#   4. a build container from the base (not privileged: nothing is unpacked or run) starts
#      containerd, imports the archive into the k8s.io namespace without unpacking it (the CRI
#      plugin unpacks an image when a container first needs it, on the node's /var volume), tags the
#      images with the names kubeadm uses; containerd is stopped and the container committed
#
# Units: containerd and kubelet are enabled; systemd-binfmt, systemd-sysctl and systemd-modules-load
# are masked, because binfmt_misc, most sysctls and kernel modules belong to the host's kernel, which
# a privileged node container shares.
#
# The cache: the image's tag carries the Kubernetes version, and a label records every input (the
# versions of everything built, the Debian suite, a hash of hack/kind/node/); an image whose label
# differs is rebuilt. The binaries are cached by hack/kind/node/binaries.sh.
#
# Needs: a Docker engine (hack/containers/engine.sh up), mmdebstrap, root (mmdebstrap, and tar of a
# root file system), go, gcc and a static libc, setcap.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=../../versions.env
source "$repo/hack/versions.env"
# shellcheck source=lib.sh
source "$here/lib.sh"
log() { printf '[kind-node] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

version=${1:-${KUBE_VERSION:-$DEFAULT_KUBE_VERSION}}
suite=${DEBIAN_SUITE:-bookworm}
image=${KIND_NODE_LOCAL_IMAGE:-servicecidr-guard.local/kind-node:$version}
label=dev.servicecidr-guard.kind-node-inputs

docker info >/dev/null 2>&1 || die "no Docker engine answers (hack/containers/engine.sh up)"
command -v mmdebstrap >/dev/null || die "mmdebstrap is needed (apt-get install mmdebstrap)"

t0=$SECONDS
binaries=$("$here/binaries.sh" "$version")
bin=$binaries/bin
files_hash=$(cd "$here" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
inputs="$(cat "$binaries/VERSIONS") debian=$suite files=$files_hash"

if [[ ${FORCE:-0} != 1 && $(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$image" 2>/dev/null) == "$inputs" ]]; then
  log "cached: $image ($inputs)"
  echo "$image"
  exit 0
fi
log "building $image ($inputs)"

work=$(mktemp -d)
build_container=''
base_image=$image-base
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  [[ -z $build_container ]] || docker rm -f "$build_container" >/dev/null 2>&1 || true
  docker rmi "$base_image" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- 2. the node's root file system ----------------------------------------------------------------
t=$SECONDS
root=$work/root
log "mmdebstrap $suite (systemd, containerd, runc, CNI plugins, iptables, conntrack)"
debian_root "$suite" "$root" systemd,systemd-sysv,containerd,runc,containernetworking-plugins,iptables,conntrack,iproute2,procps
packages=$(chroot "$root" dpkg-query -W -f "\${Package} \${Version}\n" containerd runc containernetworking-plugins systemd | paste -sd, -)
log "root file system: $((SECONDS - t)) s ($packages)"

cp -a "$here/files/." "$root/"
for name in kubelet kubeadm kubectl crictl; do install -m 755 "$bin/$name" "$root/usr/local/bin/$name"; done
echo "$version" >"$root/kind/version"
sandbox_image=$(grep '/pause:' "$binaries/images.txt")
sed -i "s|@SANDBOX_IMAGE@|$sandbox_image|" "$root/etc/containerd/config.toml"
systemctl --root="$root" enable containerd.service kubelet.service >/dev/null 2>&1
systemctl --root="$root" mask systemd-binfmt.service systemd-sysctl.service systemd-modules-load.service >/dev/null 2>&1
# The entrypoint gives each node container its own.
rm -f "$root/etc/machine-id" "$root/var/lib/dbus/machine-id"

log "importing the base"
tar -C "$root" --numeric-owner --xattrs --xattrs-include='security.capability' -c . |
  docker import --change 'ENV container=docker' - "$base_image" >/dev/null

# --- 3. the images kubeadm runs ----------------------------------------------------------------------
t=$SECONDS
"$here/images.sh" "$binaries" "$work/images.tar"
log "images: $((SECONDS - t)) s"

# --- 4. the images into the node's containerd --------------------------------------------------------
t=$SECONDS
build_container=scg-kind-node-build-$$-$RANDOM
docker run -d --name "$build_container" --entrypoint sleep "$base_image" infinity >/dev/null
# stdin only where it is read: a loop reading a file would hand the rest of it to `docker exec -i`.
in_node() { docker exec "$build_container" "$@"; }
containerd_pid=$(in_node bash -c 'mkdir -p /run/containerd; containerd >/tmp/containerd.log 2>&1 & echo $!')
for _ in $(seq 100); do
  in_node ctr version >/dev/null 2>&1 && break
  sleep 0.2
done
in_node ctr version >/dev/null 2>&1 || { in_node cat /tmp/containerd.log >&2; die "containerd did not start in the build container"; }
docker exec -i "$build_container" ctr --namespace=k8s.io images import --no-unpack - <"$work/images.tar" >/dev/null
while read -r local_name upstream; do
  in_node ctr --namespace=k8s.io images tag --force "$local_name" "$upstream" >/dev/null
  in_node ctr --namespace=k8s.io images rm "$local_name" >/dev/null
done <"$work/images.tar.names"
# The CRI plugin of this containerd also names each image by its ID (sha256:...), as on any node.
imported=$(in_node ctr --namespace=k8s.io images list -q | grep -v '^sha256:' | sort)
[[ $imported == "$(sort "$binaries/images.txt")" ]] || die "containerd holds $(tr '\n' ' ' <<<"$imported"), kubeadm wants $(tr '\n' ' ' <"$binaries/images.txt")"
in_node kill "$containerd_pid"
for _ in $(seq 100); do
  in_node kill -0 "$containerd_pid" 2>/dev/null || break
  sleep 0.2
done
in_node bash -c 'rm -rf /run/containerd /tmp/containerd.log'
log "images imported into containerd: $((SECONDS - t)) s"

# No STOPSIGNAL (Docker 20.10's commit does not take one): `docker stop` of a node waits for its
# timeout, then kills it; kind deletes nodes with `docker rm -f` anyway.
docker commit \
  --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  --change 'CMD []' \
  --change "LABEL $label=\"$inputs\"" \
  "$build_container" "$image" >/dev/null

[[ $(docker run --rm --entrypoint /usr/local/bin/kubeadm "$image" version -o short) == "$version" ]] || die "$image does not run kubeadm $version"
log "built $image in $((SECONDS - t0)) s ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec))"
echo "$image"
