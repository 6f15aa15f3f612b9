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
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { log "KUBE_VERSION must look like v1.37.2, got '$version'"; exit 1; }
minor=${BASH_REMATCH[1]}
staging_version="v0.${minor}.${BASH_REMATCH[2]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out.partial"

log "resolving k8s.io/kubernetes@$version"
kube_mod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
kube_dir=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -f $kube_mod ]] || { log "could not download k8s.io/kubernetes@$version"; exit 1; }

# A wrapper module: `go install` refuses k8s.io/kubernetes because its go.mod replaces every staging
# module with a local path. Point each of those at its published v0.Y.Z instead.
{
  echo "module servicecidr-guard.local/control-plane"
  grep -E '^(go|godebug) ' "$kube_mod"
  echo "require k8s.io/kubernetes $version"
  sed -n 's|^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*$|replace \1 => \1 '"$staging_version"'|p' "$kube_mod"
} > "$work/go.mod"
log "$(grep -c '^replace' "$work/go.mod") staging modules replaced with $staging_version"

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
cmds=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl)
(
  cd "$work"
  log "go get (module downloads: about 1 GiB on a cold cache)"
  go get "${cmds[@]/%/@$version}" >"$work/go-get.log" 2>&1 || { tail -n 40 "$work/go-get.log" >&2; exit 1; }
  log "go build ${cmds[*]##*/} (a cold build takes 10-25 minutes on 2 cores)"
  CGO_ENABLED=0 go build -trimpath -tags=selinux,notest -ldflags "$ldflags" -o "$out.partial/" "${cmds[@]}"
)

# shellcheck disable=SC2016 # a literal ${ETCD_VERSION:-...} is what the sed expression matches
etcd_version=v$(sed -n 's/^ETCD_VERSION=\${ETCD_VERSION:-\([0-9.]*\)}$/\1/p' "$kube_dir/hack/lib/etcd.sh")
[[ $etcd_version != v ]] || { log "could not read the etcd version from $kube_dir/hack/lib/etcd.sh"; exit 1; }
mkdir -p "$work/etcd"
log "building etcd $etcd_version"
(
  cd "$work/etcd"
  etcd_mod=$(go mod download -json "go.etcd.io/etcd/server/v3@$etcd_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  {
    echo "module servicecidr-guard.local/etcd"
    grep -E '^go ' "$etcd_mod"
    echo "require go.etcd.io/etcd/server/v3 $etcd_version"
    # etcd's server module replaces its sibling modules with local paths; use the published ones.
    sed -n 's|^[[:space:]]*\(go\.etcd\.io/etcd/[a-z0-9/]*\) => \.\./.*$|replace \1 => \1 '"$etcd_version"'|p' "$etcd_mod"
  } > go.mod
  go get "go.etcd.io/etcd/server/v3@$etcd_version" >"$work/go-get-etcd.log" 2>&1 || { tail -n 40 "$work/go-get-etcd.log" >&2; exit 1; }
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out.partial/etcd" go.etcd.io/etcd/server/v3
)

echo "kube=$version etcd=$etcd_version built=$(date -u +%FT%TZ)" > "$out.partial/VERSION"
rm -rf "$out"
mv "$out.partial" "$out"
log "built: $out"
echo "$out"
