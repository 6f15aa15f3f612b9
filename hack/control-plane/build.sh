#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and etcd from Go modules and caches them,
# keyed by version, outside the repository. Release binaries cannot be downloaded on our CI machines;
# the Go module proxy can be reached.
#
#   hack/control-plane/build.sh [KUBE_VERSION]      prints the directory holding the binaries
#
# KUBE_VERSION defaults to $KUBE_VERSION, then to the version pinned in hack/versions.env.
# The etcd version is the one Kubernetes itself pins (hack/lib/etcd.sh of that release).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../versions.env
source "$here/../versions.env"
version=${1:-${KUBE_VERSION:-$DEFAULT_KUBE_VERSION}}
cache_root=${SCG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/servicecidr-guard}
out="$cache_root/control-plane/$version"

log() { printf '[build-control-plane] %s\n' "$*" >&2; }

if [[ -x $out/kube-apiserver && -x $out/kube-controller-manager && -x $out/kubectl && -x $out/etcd ]]; then
  log "cached: $out"
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { log "go is not installed"; exit 1; }
# shellcheck source=lib.sh
source "$here/lib.sh"
kube_staging_version "$version" >/dev/null || exit 1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out.partial"

log "resolving k8s.io/kubernetes@$version"
kube_dir=$(kube_module "$version" Dir)
kube_wrapper_module "$work" "$version" servicecidr-guard.local/control-plane
log "$(grep -c '^replace' "$work/go.mod") staging modules replaced with $(kube_staging_version "$version")"

log "go build kube-apiserver kube-controller-manager kubectl (a cold build takes 10-25 minutes on 2 cores; module downloads about 1 GiB)"
kube_go_build "$work" "$version" "$out.partial" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl

# shellcheck disable=SC2016 # a literal ${ETCD_VERSION:-...} is what the sed expression matches
etcd_version=v$(sed -n 's/^ETCD_VERSION=\${ETCD_VERSION:-\([0-9.]*\)}$/\1/p' "$kube_dir/hack/lib/etcd.sh")
[[ $etcd_version != v ]] || { log "could not read the etcd version from $kube_dir/hack/lib/etcd.sh"; exit 1; }
log "building etcd $etcd_version"
etcd_go_build "$work/etcd" "$etcd_version" "$out.partial"

echo "kube=$version etcd=$etcd_version built=$(date -u +%FT%TZ)" > "$out.partial/VERSION"
rm -rf "$out"
mv "$out.partial" "$out"
log "built: $out"
echo "$out"
