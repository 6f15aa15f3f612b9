#!/usr/bin/env bash
# Builds every program the offline kind node image runs, from Go modules and the Kubernetes source,
# and caches them by version outside the repository (no release download is reachable here):
#
#   kubelet, kubeadm, kube-proxy, kube-scheduler   k8s.io/kubernetes@KUBE_VERSION (wrapper module of
#                                                  hack/control-plane/lib.sh, version ldflags)
#   kube-apiserver, kube-controller-manager,       hack/control-plane/build.sh's cache for the same
#   kubectl, etcd                                  version (built there if missing)
#   etcd (if kubeadm pins another version)         go.etcd.io/etcd/server/v3 at kubeadm's version
#   coredns                                        github.com/coredns/coredns at kubeadm's version,
#                                                  with the plugins of kubeadm's Corefile (coredns/main.go)
#   crictl                                         sigs.k8s.io/cri-tools at DEFAULT_CRICTL_VERSION
#   pause                                          build/pause/linux/pause.c of k8s.io/kubernetes,
#                                                  gcc -static, as upstream builds the pause image
#
#   hack/kind/node/binaries.sh [KUBE_VERSION]      prints the directory (bin/ and images.txt in it)
#
# images.txt is `kubeadm config images list` for the version: the image names and tags kubeadm will
# ask the node's containerd for, which hack/kind/node/images.sh then builds. The etcd, CoreDNS and
# pause versions are read from it, so they are always the ones kubeadm pins.
#
# Cache: $SCG_CACHE_DIR/kind-node/<KUBE_VERSION>/ (default ~/.cache/servicecidr-guard); each binary is
# built only if missing. Needs: go, gcc with a static libc (Debian: gcc, libc6-dev).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=../../versions.env
source "$repo/hack/versions.env"
# shellcheck source=../../control-plane/lib.sh
source "$repo/hack/control-plane/lib.sh"
log() { printf '[kind-node-binaries] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

version=${1:-${KUBE_VERSION:-$DEFAULT_KUBE_VERSION}}
crictl_version=${CRICTL_VERSION:-$DEFAULT_CRICTL_VERSION}
cache_root=${SCG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/servicecidr-guard}
out=$cache_root/kind-node/$version
bin=$out/bin
mkdir -p "$bin"
command -v go >/dev/null || die "go is needed to build the node's binaries"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# timed NAME CMD...: runs CMD, logs how long it took.
timed() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  log "$name: $((SECONDS - t0)) s"
}
have() { local name; for name; do [[ -x $bin/$name ]] || return 1; done; }

# --- the control plane's binaries: hack/control-plane/build.sh owns that cache -------------------
if ! have kube-apiserver kube-controller-manager kubectl; then
  control_plane=$("$repo/hack/control-plane/build.sh" "$version")
  for name in kube-apiserver kube-controller-manager kubectl etcd; do
    # Hard links: no copy of 100+ MB when the caches share a file system.
    ln -f "$control_plane/$name" "$bin/$name.new" 2>/dev/null || cp "$control_plane/$name" "$bin/$name.new"
    mv "$bin/$name.new" "$bin/$name"
  done
  cp "$control_plane/VERSION" "$out/control-plane.VERSION"
fi

# --- kubelet, kubeadm, kube-proxy, kube-scheduler ------------------------------------------------
if ! have kubelet kubeadm kube-proxy kube-scheduler; then
  log "go build kubelet kubeadm kube-proxy kube-scheduler $version (the packages shared with the control plane come from the Go build cache)"
  kube_wrapper_module "$work/kube" "$version" servicecidr-guard.local/kind-node
  timed "kubelet kubeadm kube-proxy kube-scheduler" kube_go_build "$work/kube" "$version" "$work/kube/out" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
  for name in kubelet kubeadm kube-proxy kube-scheduler; do mv "$work/kube/out/$name" "$bin/$name"; done
fi
[[ $("$bin/kubeadm" version -o short) == "$version" ]] || die "kubeadm reports $("$bin/kubeadm" version -o short), not $version"

# --- what kubeadm will ask for ------------------------------------------------------------------
"$bin/kubeadm" config images list --kubernetes-version "$version" >"$out/images.txt"
tag_of() { sed -n "s|^registry\.k8s\.io/\(.*/\)\{0,1\}$1:||p" "$out/images.txt"; }
etcd_tag=$(tag_of etcd)
coredns_version=$(tag_of coredns)
pause_version=$(tag_of pause)
[[ -n $etcd_tag && -n $coredns_version && -n $pause_version ]] || die "unexpected kubeadm images list: $(tr '\n' ' ' <"$out/images.txt")"
etcd_version=v${etcd_tag%-*}

# --- etcd at kubeadm's version, if the control plane's differs ---------------------------------
if [[ $("$bin/etcd" --version 2>/dev/null | sed -n 's/^etcd Version: /v/p') != "$etcd_version" ]]; then
  log "etcd: kubeadm pins $etcd_version; building it"
  timed "etcd $etcd_version" etcd_go_build "$work/etcd" "$etcd_version" "$work/etcd/out"
  mv "$work/etcd/out/etcd" "$bin/etcd"
fi

# --- crictl ------------------------------------------------------------------------------------
if ! have crictl || [[ $("$bin/crictl" --version) != "crictl version ${crictl_version#v}" ]]; then
  log "go install sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version"
  timed "crictl $crictl_version" env GOBIN="$work/crictl" CGO_ENABLED=0 go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${crictl_version#v}" "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version"
  mv "$work/crictl/crictl" "$bin/crictl"
fi

# --- coredns -----------------------------------------------------------------------------------
if ! have coredns || ! "$bin/coredns" -version | grep -qx "CoreDNS-${coredns_version#v}"; then
  log "go build coredns $coredns_version (the plugins of kubeadm's Corefile: coredns/main.go)"
  mkdir -p "$work/coredns"
  cp "$here/coredns/main.go" "$work/coredns/"
  (
    cd "$work/coredns"
    printf 'module servicecidr-guard.local/coredns\n\ngo 1.25\n' >go.mod
    go get "github.com/coredns/coredns@$coredns_version" >go-get.log 2>&1 || { tail -n 40 go-get.log >&2; exit 1; }
    go mod tidy >>go-get.log 2>&1 || { tail -n 40 go-get.log >&2; exit 1; }
    timed "coredns $coredns_version" env CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o coredns .
  )
  mv "$work/coredns/coredns" "$bin/coredns"
fi

# --- pause ---------------------------------------------------------------------------------------
if ! have pause || [[ $(cat "$out/pause.VERSION" 2>/dev/null) != "$pause_version" ]]; then
  command -v gcc >/dev/null || die "gcc is needed for the pause binary (apt-get install gcc libc6-dev)"
  source=$(kube_module "$version" Dir)/build/pause/linux/pause.c
  log "gcc -static $source"
  # The flags of build/pause/Makefile (CFLAGS); VERSION is what `pause -v` prints.
  gcc -Os -Wall -Werror -static -DVERSION="v$pause_version-$version" -o "$work/pause" "$source" ||
    die "gcc -static failed (a static libc is in Debian's libc6-dev)"
  strip "$work/pause"
  mv "$work/pause" "$bin/pause"
  echo "$pause_version" >"$out/pause.VERSION"
fi

printf 'kube=%s etcd=%s coredns=%s pause=%s crictl=%s\n' "$version" "$etcd_version" "$coredns_version" "$pause_version" "$crictl_version" >"$out/VERSIONS"
log "$(cat "$out/VERSIONS"): $bin"
echo "$out"
