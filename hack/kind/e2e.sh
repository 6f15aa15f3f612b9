#!/usr/bin/env bash
# Runs the e2e suite against servicecidr-guard installed the way users install it: a kind cluster,
# the image built from this tree, cert-manager, and `kubectl apply -k config/overlays/kind`.
#
#   hack/kind/e2e.sh                       (make e2e-kind)
#   KIND_VARIANT=v1beta1 hack/kind/e2e.sh  Kubernetes 1.32, ServiceCIDR v1beta1 behind its gate
#   KEEP_CLUSTER=1 hack/kind/e2e.sh        keep the cluster afterwards (a second run reuses it)
#
# Overrides: KIND_VERSION, KIND_NODE_IMAGE, CERT_MANAGER_VERSION, KIND_CLUSTER_NAME, KIND (a kind
# binary), KUBECTL, CONTAINER_TOOL.
#
# Needs a running Docker engine, go (to build the pinned kind), npm (for the suite) and a kubectl
# (hack/control-plane/find-kubectl.sh). Everything fetched from outside is pinned in hack/versions.env.
#
# Steps: create the cluster (hack/kind/config.yaml) -> docker build -t servicecidr-guard:e2e ->
# kind load docker-image -> cert-manager (its release manifest) and wait for it -> apply -k
# config/overlays/kind -> wait for the certificate, the CA injection and the rollout ->
# `npm run test:e2e` with KUBECONFIG set to the cluster and E2E_TARGET=kind -> delete the cluster
# (unless KEEP_CLUSTER=1). On failure, the webhook's state and logs are printed.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"

# --- pins (hack/versions.env) ----------------------------------------------------------------
# KIND_VARIANT=v1 (default): Kubernetes 1.37, ServiceCIDR v1.
# KIND_VARIANT=v1beta1: Kubernetes 1.32 with the kind release that built its node image, for
#   networking.k8s.io/v1beta1 behind its feature gate.
# shellcheck source=../versions.env
source "$repo/hack/versions.env"
variant=${KIND_VARIANT:-v1}
case $variant in
  v1)
    kind_version=${KIND_VERSION:-$DEFAULT_KIND_VERSION}
    node_image=${KIND_NODE_IMAGE:-$DEFAULT_KIND_NODE_IMAGE}
    kind_config=$repo/hack/kind/config.yaml
    ;;
  v1beta1)
    kind_version=${KIND_VERSION:-$DEFAULT_KIND_BETA_VERSION}
    node_image=${KIND_NODE_IMAGE:-$DEFAULT_KIND_BETA_NODE_IMAGE}
    kind_config=$repo/hack/kind/config-v1beta1.yaml
    ;;
  *) echo "KIND_VARIANT must be v1 or v1beta1, got '$variant'" >&2; exit 1 ;;
esac
cert_manager_version=${CERT_MANAGER_VERSION:-$DEFAULT_CERT_MANAGER_VERSION}
cert_manager_manifest=https://github.com/cert-manager/cert-manager/releases/download/$cert_manager_version/cert-manager.yaml
cluster=${KIND_CLUSTER_NAME:-servicecidr-guard-e2e}
# The kind overlay names this image and never pulls it.
image=servicecidr-guard:e2e
container_tool=${CONTAINER_TOOL:-docker}
namespace=servicecidr-guard-system

log() { printf '[e2e-kind] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- preconditions: fail before doing anything slow --------------------------------------------
command -v "$container_tool" >/dev/null || die "$container_tool is not installed: kind runs its nodes as containers"
if ! "$container_tool" info >/dev/null 2>&1; then
  die "no container engine answers ('$container_tool info' failed): start Docker, or run the e2e suite on a local control plane instead (make e2e-local)"
fi
command -v npm >/dev/null || die "npm is not installed"
command -v jq >/dev/null || die "jq is not installed"
kubectl=$(hack/control-plane/find-kubectl.sh)

# kind, built from the Go module proxy at the pinned version and cached (make kind does the same).
tools_dir=${TOOLS_DIR:-${SCG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/servicecidr-guard}/tools}
kind=${KIND:-$tools_dir/kind-$kind_version}
if [[ ! -x $kind ]]; then
  command -v go >/dev/null || die "go is needed to build kind $kind_version (or set KIND to a kind binary)"
  log "building kind $kind_version into $kind"
  mkdir -p "$(dirname "$kind")"
  gobin=$(mktemp -d)
  GOBIN=$gobin go install "sigs.k8s.io/kind@$kind_version"
  mv "$gobin/kind" "$kind"
  rm -rf "$gobin"
fi
log "kind $("$kind" version | awk '{ print $2 }'), node image $node_image, cert-manager $cert_manager_version"

work=$repo/_output/kind
mkdir -p "$work"
kubeconfig=$work/$cluster.kubeconfig
export KUBECONFIG=$kubeconfig
k() { "$kubectl" --kubeconfig "$kubeconfig" "$@"; }

created=false
reused=false
finish() {
  local status=$?
  if [[ $status -ne 0 && -s $kubeconfig ]]; then
    log "failed; state of the cluster:"
    k get nodes,servicecidrs -o wide >&2 || true
    k -n "$namespace" get all,certificates,issuers,configmaps,events >&2 || true
    k -n "$namespace" logs -l app.kubernetes.io/name=servicecidr-guard --all-containers --prefix --tail=100 >&2 || true
    k -n cert-manager get pods >&2 || true
  fi
  if [[ ${KEEP_CLUSTER:-} == 1 ]]; then
    log "KEEP_CLUSTER=1: cluster '$cluster' kept; KUBECONFIG=$kubeconfig; delete it with: $kind delete cluster --name $cluster"
  elif [[ $created == true || $reused == true ]]; then
    log "deleting cluster '$cluster'"
    "$kind" delete cluster --name "$cluster" >&2 || true
    rm -f "$kubeconfig"
  fi
  exit "$status"
}
trap finish EXIT

# --- cluster ------------------------------------------------------------------------------------
if "$kind" get clusters 2>/dev/null | grep -qx "$cluster"; then
  log "cluster '$cluster' exists: reusing it (KEEP_CLUSTER=1 from an earlier run?)"
  reused=true
  "$kind" get kubeconfig --name "$cluster" > "$kubeconfig"
else
  log "creating cluster '$cluster' ($kind_config)"
  created=true
  "$kind" create cluster --name "$cluster" --config "$kind_config" --image "$node_image" \
    --kubeconfig "$kubeconfig" --wait 180s
fi
k version >&2

# --- image --------------------------------------------------------------------------------------
log "building $image"
"$container_tool" build -t "$image" \
  --build-arg VERSION="$(jq -r .version package.json)" \
  --build-arg REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)" .
log "loading $image into the kind node"
"$kind" load docker-image "$image" --name "$cluster"

# --- cert-manager -------------------------------------------------------------------------------
log "installing cert-manager $cert_manager_version"
k apply -f "$cert_manager_manifest" >&2
k -n cert-manager wait deployment --all --for=condition=Available --timeout=300s >&2

# --- servicecidr-guard --------------------------------------------------------------------------
# cert-manager's own webhook may take a few more seconds to accept Certificates after its
# Deployment is Available (its CA is injected asynchronously): retry the apply until it goes in.
log "applying config/overlays/kind"
for attempt in $(seq 1 30); do
  if k apply -k config/overlays/kind > "$work/apply.log" 2>&1; then break; fi
  (( attempt < 30 )) || { cat "$work/apply.log" >&2; die "kubectl apply -k config/overlays/kind kept failing"; }
  sleep 5
done
cat "$work/apply.log" >&2
k -n "$namespace" wait certificate/servicecidr-guard-serving-cert --for=condition=Ready --timeout=180s >&2
log "waiting for cert-manager to inject the CA into the webhook configuration"
for _ in $(seq 1 60); do
  ca=$(k get validatingwebhookconfiguration servicecidr-guard -o jsonpath='{.webhooks[0].clientConfig.caBundle}')
  [[ -n $ca ]] && break
  sleep 2
done
[[ -n $ca ]] || die "caBundle of the ValidatingWebhookConfiguration is still empty after 120 s (cainjector)"
k -n "$namespace" rollout status deployment/servicecidr-guard --timeout=300s >&2

# --- the suite ----------------------------------------------------------------------------------
log "running the e2e suite (E2E_TARGET=kind, KUBECONFIG=$kubeconfig)"
E2E_TARGET=kind KIND_CLUSTER_NAME=$cluster npm run test:e2e
log "e2e suite passed on kind ($variant)"
