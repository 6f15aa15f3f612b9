#!/usr/bin/env bash
# Builds the container images kubeadm runs on the offline kind node (its control plane as static
# Pods, kube-proxy and CoreDNS as addons, and the Pod sandbox), from the binaries of
# hack/kind/node/binaries.sh, without any registry: each image is a file tree imported with
# `docker import`. Writes them, under the names and tags kubeadm asks for, to one image archive
# that hack/kind/node/build.sh imports into the node's containerd.
#
#   hack/kind/node/images.sh BINARIES_DIR ARCHIVE
#
# BINARIES_DIR is what binaries.sh printed: bin/ and images.txt (`kubeadm config images list`).
# Each image is laid out like the upstream one, so kubeadm's manifests run it unchanged:
#   kube-apiserver, kube-controller-manager, kube-scheduler, etcd
#                    the static binary in /usr/local/bin (kubeadm names the command; PATH finds it),
#                    /etc/passwd and /etc/group with root and nonroot (65532), /tmp
#   kube-proxy       Debian minbase with iptables and conntrack (iptables mode execs them), the
#                    binary in /usr/local/bin
#   coredns          /coredns with the cap_net_bind_service file capability, user 65532: kubeadm's
#                    Deployment drops every capability but NET_BIND_SERVICE, for port 53
#   pause            /pause, user 65535, as build/pause/Dockerfile of Kubernetes
# An image kubeadm asks for that is not listed here stops the build.
#
# The archive holds the images as servicecidr-guard.local/kind-node/NAME:TAG, and ARCHIVE.names maps
# each to the name kubeadm uses (registry.k8s.io/...): the host's Docker never holds an image that
# claims to be an upstream one. The docker images are removed again once saved.
#
# Needs: a Docker engine, mmdebstrap, setcap (libcap2-bin), GNU tar.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

binaries=${1:?usage: images.sh BINARIES_DIR ARCHIVE}
archive=${2:?usage: images.sh BINARIES_DIR ARCHIVE}
bin=$binaries/bin
suite=${DEBIAN_SUITE:-bookworm}
prefix=servicecidr-guard.local/kind-node
log() { printf '[kind-node-images] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
[[ -s $binaries/images.txt ]] || die "$binaries/images.txt is missing: run hack/kind/node/binaries.sh"
command -v setcap >/dev/null || die "setcap is needed (apt-get install libcap2-bin)"

work=$(mktemp -d)
local_tags=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  ((${#local_tags[@]} == 0)) || docker rmi "${local_tags[@]}" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
: >"$archive.names"

# static_root DIR: what a static Go binary's image has besides the binary (distroless/static's
# essentials): users root and nonroot, and a writable /tmp.
static_root() {
  mkdir -p "$1/etc" "$1/tmp" "$1/usr/local/bin"
  chmod 1777 "$1/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$1/etc/group"
}

# add_image UPSTREAM_NAME DIR [--change ...]: imports DIR as the local image for UPSTREAM_NAME.
add_image() {
  local upstream=$1 dir=$2 local_name
  shift 2
  local_name=$prefix/${upstream#registry.k8s.io/}
  local_name=${local_name//coredns\/coredns/coredns}
  # --xattrs: the file capability of /coredns travels as an extended attribute.
  tar -C "$dir" --numeric-owner --owner=0 --group=0 --xattrs --xattrs-include='security.capability' -c . |
    docker import --change "LABEL dev.servicecidr-guard.kind-node-image=\"$upstream\"" "$@" - "$local_name" >/dev/null
  local_tags+=("$local_name")
  echo "$local_name $upstream" >>"$archive.names"
  log "$upstream <- $local_name ($(docker image inspect -f '{{.Size}}' "$local_name" | numfmt --to=iec))"
}

while read -r image; do
  name=${image##*/}
  name=${name%%:*}
  dir=$work/$name
  case $name in
    kube-apiserver | kube-controller-manager | kube-scheduler | etcd)
      static_root "$dir"
      install -m 755 "$bin/$name" "$dir/usr/local/bin/$name"
      add_image "$image" "$dir" --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin'
      ;;
    kube-proxy)
      log "mmdebstrap $suite (minbase + iptables, conntrack) for kube-proxy"
      debian_root "$suite" "$dir" iptables,conntrack
      install -m 755 "$bin/kube-proxy" "$dir/usr/local/bin/kube-proxy"
      add_image "$image" "$dir" --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
      ;;
    coredns)
      static_root "$dir"
      install -m 755 "$bin/coredns" "$dir/coredns"
      setcap cap_net_bind_service=+ep "$dir/coredns"
      add_image "$image" "$dir" --change 'USER 65532:65532' --change 'ENTRYPOINT ["/coredns"]'
      ;;
    pause)
      mkdir -p "$dir"
      install -m 755 "$bin/pause" "$dir/pause"
      add_image "$image" "$dir" --change 'USER 65535:65535' --change 'ENTRYPOINT ["/pause"]'
      ;;
    *) die "kubeadm asks for $image, which this script does not know how to build" ;;
  esac
done <"$binaries/images.txt"

docker save -o "$archive" "${local_tags[@]}"
log "saved ${#local_tags[@]} images to $archive ($(du -h "$archive" | cut -f1))"
