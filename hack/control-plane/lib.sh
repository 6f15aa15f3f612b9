# shellcheck shell=bash
# Building Kubernetes commands from the Go module proxy, shared by hack/control-plane/build.sh
# (kube-apiserver, kube-controller-manager, kubectl, etcd) and hack/kind/node/binaries.sh (kubelet,
# kubeadm, kube-proxy, kube-scheduler). Sourced, not run. Needs go.
#
#   kube_module VERSION FIELD        Dir or GoMod of k8s.io/kubernetes@VERSION (downloads it)
#   kube_wrapper_module DIR VERSION NAME
#                                    writes DIR/go.mod: module NAME requiring k8s.io/kubernetes
#                                    VERSION, every staging module replaced by its published v0.Y.Z
#   kube_ldflags VERSION             the -ldflags that stamp VERSION into the binaries
#   kube_go_build DIR VERSION OUT CMD...
#                                    go get + go build of the k8s.io/kubernetes/cmd/... packages CMD in
#                                    the wrapper module DIR, into the directory OUT
#   etcd_go_build DIR VERSION OUT    etcd VERSION (v3.7.0) from go.etcd.io/etcd/server/v3 into OUT/etcd

# kube_module VERSION FIELD: prints the Dir or GoMod path of k8s.io/kubernetes@VERSION.
kube_module() {
  go mod download -json "k8s.io/kubernetes@$1" | sed -n 's/^[[:space:]]*"'"$2"'": "\(.*\)",$/\1/p'
}

# kube_staging_version VERSION: v1.37.2 -> v0.37.2, the tag of the published staging modules.
kube_staging_version() {
  [[ $1 =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "kube version must look like v1.37.2, got '$1'" >&2; return 1; }
  echo "v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
}

# kube_wrapper_module DIR VERSION NAME. `go install` refuses k8s.io/kubernetes because its go.mod
# replaces every staging module (k8s.io/api, apimachinery, client-go, ...) with a local path. A
# wrapper module requires k8s.io/kubernetes and points each of those at its published v0.Y.Z
# instead; the list comes from the real go.mod of that version, with its go and godebug lines.
kube_wrapper_module() {
  local dir=$1 version=$2 name=$3 gomod staging
  staging=$(kube_staging_version "$version") || return 1
  gomod=$(kube_module "$version" GoMod)
  [[ -f $gomod ]] || { echo "could not download k8s.io/kubernetes@$version" >&2; return 1; }
  mkdir -p "$dir"
  {
    echo "module $name"
    grep -E '^(go|godebug) ' "$gomod"
    echo "require k8s.io/kubernetes $version"
    sed -n 's|^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*$|replace \1 => \1 '"$staging"'|p' "$gomod"
  } >"$dir/go.mod"
}

# kube_ldflags VERSION: without these, kubeadm and the kubelet report v0.0.0-master, and kubeadm
# then asks for images and configurations of a version that does not exist.
kube_ldflags() {
  local version=$1 minor flags="-s -w"
  [[ $version =~ ^v1\.([0-9]+)\. ]] || return 1
  minor=${BASH_REMATCH[1]}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "$flags"
}

# kube_go_build DIR VERSION OUT CMD...: CGO_ENABLED=0 -trimpath -tags=selinux,notest, as upstream
# builds its release binaries. The go get log is kept in DIR and its end printed on failure.
kube_go_build() {
  local dir=$1 version=$2 out=$3 ldflags
  shift 3
  ldflags=$(kube_ldflags "$version")
  (
    cd "$dir" || exit 1
    go get "${@/%/@$version}" >"$dir/go-get.log" 2>&1 || { tail -n 40 "$dir/go-get.log" >&2; exit 1; }
    CGO_ENABLED=0 go build -trimpath -tags=selinux,notest -ldflags "$ldflags" -o "$out/" "$@"
  )
}

# etcd_go_build DIR VERSION OUT: etcd VERSION (v3.7.0) into OUT/etcd. The main package is the root
# of go.etcd.io/etcd/server/v3, whose go.mod replaces its sibling modules (api, client, pkg) with
# local paths: the wrapper module in DIR points them at the published ones of the same version.
etcd_go_build() {
  local dir=$1 version=$2 out=$3 gomod
  gomod=$(go mod download -json "go.etcd.io/etcd/server/v3@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [[ -f $gomod ]] || { echo "could not download go.etcd.io/etcd/server/v3@$version" >&2; return 1; }
  mkdir -p "$dir"
  {
    echo "module servicecidr-guard.local/etcd"
    grep -E '^go ' "$gomod"
    echo "require go.etcd.io/etcd/server/v3 $version"
    sed -n 's|^[[:space:]]*\(go\.etcd\.io/etcd/[a-z0-9/]*\) => \.\./.*$|replace \1 => \1 '"$version"'|p' "$gomod"
  } >"$dir/go.mod"
  (
    cd "$dir" || exit 1
    go get "go.etcd.io/etcd/server/v3@$version" >"$dir/go-get.log" 2>&1 || { tail -n 40 "$dir/go-get.log" >&2; exit 1; }
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
  )
}
