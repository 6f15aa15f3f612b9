#!/usr/bin/env bash
# Runs the e2e suite against servicecidr-guard installed the way users install it: a kind cluster,
# the image built from this tree, cert-manager, and `kubectl apply -k config/overlays/kind`. Prints
# how long each phase took.
#
#   hack/kind/e2e.sh                        (make e2e-kind)
#   KIND_MODE=local hack/kind/e2e.sh        force the offline way (below)
#   KIND_VARIANT=v1beta1 hack/kind/e2e.sh   Kubernetes 1.32, ServiceCIDR v1beta1 behind its gate (upstream only)
#   KEEP_CLUSTER=1 hack/kind/e2e.sh         keep the cluster afterwards; a second run with it reuses it
#                                           (without it, a cluster found is deleted and made afresh)
#
# KIND_MODE chooses where the node image and cert-manager come from, the way hack/images/build.sh
# chooses base images:
#   upstream  the kindest/node image kind was released with (pulled from Docker Hub) and the
#             cert-manager release manifest (GitHub, quay.io): what a user's laptop runs
#   local     a node image assembled here from Debian packages and Go modules (hack/kind/node/build.sh,
#             cached), hack/kind/config-offline.yaml, and cert-manager's CRDs from its Go module with
#             a stand-in for its controllers (test/e2e/harness/cert-manager-standin.ts): for machines
#             that reach no container registry, such as this project's CI
#   auto      (default) upstream when the node image is present locally or Docker Hub answers, and
#             GitHub and quay.io answer; local otherwise. Prints which, and why.
#
# Phases: kind (built from the Go module proxy, cached) -> node-image -> cluster (kind create) ->
# image (hack/images/build.sh, kind load) -> cert-manager -> install (apply -k config/overlays/kind)
# -> certificates (cert-manager, or the stand-in) -> rollout -> suite (`npm run test:e2e`,
# E2E_TARGET=kind, E2E_REQUIRE gets kind-faults: the kind-only fault specs must run) -> delete.
#
# Overrides: KIND_VERSION, KIND_NODE_IMAGE, CERT_MANAGER_VERSION, KUBE_VERSION (local mode),
# KIND_CLUSTER_NAME, KIND_API_SERVER_PORT (the port on 127.0.0.1 kind publishes kube-apiserver on;
# default: one kind picks), KIND (a kind binary), KUBECTL, CONTAINER_TOOL, BASE_IMAGES (hack/images/build.sh),
# E2E_SUMMARY, E2E_REQUIRE.
#
# Needs a running Docker engine (hack/containers/engine.sh up), go (kind; local mode: the node image
# and the CRDs), npm, jq, and a kubectl (hack/control-plane/find-kubectl.sh). Everything fetched from
# outside is pinned in hack/versions.env.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
# shellcheck source=../versions.env
source "$repo/hack/versions.env"
log() { printf '[e2e-kind] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- pins (hack/versions.env) ----------------------------------------------------------------
variant=${KIND_VARIANT:-v1}
case $variant in
  v1)
    kind_version=${KIND_VERSION:-$DEFAULT_KIND_VERSION}
    upstream_node_image=${KIND_NODE_IMAGE:-$DEFAULT_KIND_NODE_IMAGE}
    upstream_config=$repo/hack/kind/config.yaml
    ;;
  v1beta1)
    kind_version=${KIND_VERSION:-$DEFAULT_KIND_BETA_VERSION}
    upstream_node_image=${KIND_NODE_IMAGE:-$DEFAULT_KIND_BETA_NODE_IMAGE}
    upstream_config=$repo/hack/kind/config-v1beta1.yaml
    ;;
  *) die "KIND_VARIANT must be v1 or v1beta1, got '$variant'" ;;
esac
kube_version=${KUBE_VERSION:-$DEFAULT_KUBE_VERSION}
cert_manager_version=${CERT_MANAGER_VERSION:-$DEFAULT_CERT_MANAGER_VERSION}
cert_manager_manifest=https://github.com/cert-manager/cert-manager/releases/download/$cert_manager_version/cert-manager.yaml
cluster=${KIND_CLUSTER_NAME:-servicecidr-guard-e2e}
# The kind overlay names this image and never pulls it.
image=servicecidr-guard:e2e
container_tool=${CONTAINER_TOOL:-docker}
namespace=servicecidr-guard-system

# --- preconditions: fail before doing anything slow --------------------------------------------
command -v "$container_tool" >/dev/null || die "$container_tool is not installed: kind runs its nodes as containers (make container-engine)"
"$container_tool" info >/dev/null 2>&1 ||
  die "no container engine answers ('$container_tool info' failed): run make container-engine, or the e2e suite on a local control plane (make e2e-local)"
command -v npm >/dev/null || die "npm is not installed"
command -v jq >/dev/null || die "jq is not installed"
kubectl=$(hack/control-plane/find-kubectl.sh)

# registry_answers HOST: HTTPS answers at all (any status; 401 is normal for a registry).
registry_answers() { [[ $(curl -sS -m 5 -o /dev/null -w '%{http_code}' "https://$1/v2/" 2>/dev/null) != 000 ]]; }
mode=${KIND_MODE:-auto}
if [[ $mode == auto ]]; then
  if ! "$container_tool" image inspect "$upstream_node_image" >/dev/null 2>&1 && ! registry_answers registry-1.docker.io; then
    mode=local why="$upstream_node_image is not present and Docker Hub does not answer"
  elif ! registry_answers github.com || ! registry_answers quay.io; then
    mode=local why="the cert-manager release (github.com, quay.io) cannot be reached"
  else
    mode=upstream why="the node image and the cert-manager release can be fetched"
  fi
  log "KIND_MODE=auto: $mode ($why)"
fi
case $mode in
  upstream)
    node_image=$upstream_node_image
    kind_config=$upstream_config
    ;;
  local)
    [[ $variant == v1 ]] || die "KIND_VARIANT=$variant needs the upstream node image $upstream_node_image (kind $kind_version); the offline node image is built for Kubernetes $kube_version only. The v1beta1 API is proven on the local control plane: make e2e-beta"
    kind_config=$repo/hack/kind/config-offline.yaml
    ;;
  *) die "KIND_MODE must be auto, upstream or local, not '$mode'" ;;
esac

now() { date +%s.%N; }
elapsed() { awk -v t0="$1" -v t1="$2" 'BEGIN { printf "%.1f", t1 - t0 }'; }
phases=()
t_start=$(now)
t_phase=$t_start
phase_name=''
# phase NAME: ends the running phase (recording its time) and starts NAME.
phase() {
  local t
  t=$(now)
  [[ -z $phase_name ]] || phases+=("$phase_name $(elapsed "$t_phase" "$t") s")
  phase_name=$1
  t_phase=$t
  [[ -z $phase_name ]] || log "=== $phase_name"
}

work=$repo/_output/kind
mkdir -p "$work"
kubeconfig=$work/$cluster.kubeconfig
export KUBECONFIG=$kubeconfig
k() { "$kubectl" --kubeconfig "$kubeconfig" "$@"; }

tools_dir=${TOOLS_DIR:-${SCG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/servicecidr-guard}/tools}
kind=${KIND:-$tools_dir/kind-$kind_version}
created=false
reused=false
suite_status=not-run
# shellcheck disable=SC2317 # run by the EXIT trap
finish() {
  local status=$?
  if [[ $status -ne 0 && -s $kubeconfig ]]; then
    log "failed in phase '${phase_name:-?}'; state of the cluster:"
    k get nodes,servicecidrs -o wide >&2 || true
    k get pods -A -o wide >&2 || true
    k -n "$namespace" get all,certificates,issuers,configmaps,events >&2 || true
    k -n "$namespace" logs -l app.kubernetes.io/name=servicecidr-guard --all-containers --prefix --tail=100 >&2 || true
    k -n cert-manager get pods >&2 || true
  fi
  if [[ ${KEEP_CLUSTER:-} == 1 ]]; then
    log "KEEP_CLUSTER=1: cluster '$cluster' kept; KUBECONFIG=$kubeconfig; delete it with: $kind delete cluster --name $cluster"
  elif [[ $created == true || $reused == true ]]; then
    phase delete
    "$kind" delete cluster --name "$cluster" >&2 || true
    rm -f "$kubeconfig"
  fi
  phase ''
  log "phases: ${phases[*]}; total $(elapsed "$t_start" "$(now)") s; mode: $mode; suite: $suite_status"
  exit "$status"
}
trap finish EXIT

# --- kind, built from the Go module proxy at the pinned version and cached (make kind does the same)
phase kind
if [[ ! -x $kind ]]; then
  command -v go >/dev/null || die "go is needed to build kind $kind_version (or set KIND to a kind binary)"
  log "building kind $kind_version into $kind"
  mkdir -p "$(dirname "$kind")"
  gobin=$(mktemp -d)
  GOBIN=$gobin go install "sigs.k8s.io/kind@$kind_version"
  mv "$gobin/kind" "$kind"
  rm -rf "$gobin"
fi

# --- the node image ---------------------------------------------------------------------------------
phase node-image
if [[ $mode == local ]]; then
  node_image=$(hack/kind/node/build.sh "$kube_version")
elif ! "$container_tool" image inspect "$node_image" >/dev/null 2>&1; then
  "$container_tool" pull "$node_image" >&2
fi
log "kind $("$kind" version | awk '{ print $2 }'), node image $node_image, $kind_config, cert-manager $cert_manager_version ($mode)"

# --- cluster ------------------------------------------------------------------------------------
phase cluster
# A cluster of this name is reused only when this run keeps it too (KEEP_CLUSTER=1 again: a
# developer's loop). Otherwise it is one a run left behind, kept or cut short (a machine restarted
# mid-suite), with that run's objects in it: CI once reused such a cluster, and a left-over
# ServiceCIDR failed the walkthrough. Such a cluster is deleted and a fresh one created.
if "$kind" get clusters 2>/dev/null | grep -qx "$cluster" && [[ ${KEEP_CLUSTER:-} != 1 ]]; then
  log "cluster '$cluster' exists, left by an earlier run: deleting it (KEEP_CLUSTER=1 would reuse it)"
  "$kind" delete cluster --name "$cluster" >&2
fi
if "$kind" get clusters 2>/dev/null | grep -qx "$cluster"; then
  log "cluster '$cluster' exists: reusing it (KEEP_CLUSTER=1)"
  reused=true
  "$kind" get kubeconfig --name "$cluster" >"$kubeconfig"
else
  if [[ -n ${KIND_API_SERVER_PORT:-} ]]; then
    # kind's configuration has no override flag: a copy with networking.apiServerPort set.
    [[ $KIND_API_SERVER_PORT =~ ^[0-9]+$ ]] || die "KIND_API_SERVER_PORT must be a port number, not '$KIND_API_SERVER_PORT'"
    sed "s/^networking:\$/&\n  apiServerAddress: 127.0.0.1\n  apiServerPort: $KIND_API_SERVER_PORT/" "$kind_config" >"$work/kind-config.yaml"
    grep -q "apiServerPort: $KIND_API_SERVER_PORT" "$work/kind-config.yaml" || die "$kind_config has no top-level 'networking:' to set the port in"
    kind_config=$work/kind-config.yaml
  fi
  log "creating cluster '$cluster'"
  created=true
  "$kind" create cluster --name "$cluster" --config "$kind_config" --image "$node_image" \
    --kubeconfig "$kubeconfig" --wait 180s
fi
k version >&2

# --- image --------------------------------------------------------------------------------------
phase image
IMG=$image hack/images/build.sh
log "loading $image into the kind node"
"$kind" load docker-image "$image" --name "$cluster"

# --- cert-manager -------------------------------------------------------------------------------
phase cert-manager
if [[ $mode == upstream ]]; then
  log "installing cert-manager $cert_manager_version (release manifest)"
  k apply -f "$cert_manager_manifest" >&2
  k -n cert-manager wait deployment --all --for=condition=Available --timeout=300s >&2
else
  # The CRDs only, from the module that holds cert-manager's source at the pinned version (read
  # from the Go module cache, never copied into this repository): plain controller-gen YAML, which
  # the release manifest also carries. Its controllers cannot run here (their images cannot be
  # pulled); the certificates phase stands in for them.
  crds=$(go mod download -json "github.com/cert-manager/cert-manager@$cert_manager_version" | jq -r .Dir)/deploy/crds
  [[ -d $crds ]] || die "no deploy/crds in github.com/cert-manager/cert-manager@$cert_manager_version"
  if grep -l '{{' "$crds"/*.yaml >&2; then die "the CRDs in $crds are templates now, not plain YAML: render them first"; fi
  log "installing cert-manager $cert_manager_version CRDs from $crds"
  k apply --server-side --field-manager=servicecidr-guard-e2e -f "$crds" >&2
  # Polled, not `kubectl wait --for=condition=Established`: on a CRD created a moment ago whose
  # status.conditions is still unset, that fails at once ("accessor error: <nil>") instead of waiting.
  for crd in certificates.cert-manager.io issuers.cert-manager.io; do
    for attempt in $(seq 120); do
      [[ $(k get crd "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null) == True ]] && break
      ((attempt < 120)) || die "CRD $crd not Established within 60 s"
      sleep 0.5
    done
  done
  log "cert-manager CRDs Established"
fi

# --- servicecidr-guard --------------------------------------------------------------------------
phase install
# cert-manager's own webhook may take a few more seconds to accept Certificates after its
# Deployment is Available (its CA is injected asynchronously): retry the apply until it goes in.
log "applying config/overlays/kind"
for attempt in $(seq 1 30); do
  if k apply -k config/overlays/kind >"$work/apply.log" 2>&1; then break; fi
  ((attempt < 30)) || { cat "$work/apply.log" >&2; die "kubectl apply -k config/overlays/kind kept failing"; }
  sleep 5
done
cat "$work/apply.log" >&2

phase certificates
if [[ $mode == upstream ]]; then
  k -n "$namespace" wait certificate/servicecidr-guard-serving-cert --for=condition=Ready --timeout=180s >&2
else
  log "cert-manager stand-in: issuing the Certificates and injecting the CA (test/e2e/harness/cert-manager-standin.ts)"
  node_modules/.bin/node test/e2e/harness/cert-manager-standin.ts
fi
log "waiting for the CA in the webhook configuration"
ca=''
for _ in $(seq 1 60); do
  ca=$(k get validatingwebhookconfiguration servicecidr-guard -o jsonpath='{.webhooks[0].clientConfig.caBundle}')
  [[ -n $ca ]] && break
  sleep 2
done
[[ -n $ca ]] || die "caBundle of the ValidatingWebhookConfiguration is still empty after 120 s"

phase rollout
k -n "$namespace" rollout status deployment/servicecidr-guard --timeout=300s >&2

# --- the suite ----------------------------------------------------------------------------------
phase suite
npm run --silent build
require=kind-faults${E2E_REQUIRE:+,$E2E_REQUIRE}
log "running the e2e suite (E2E_TARGET=kind, E2E_REQUIRE=$require, KUBECONFIG=$kubeconfig)"
set +e
E2E_TARGET=kind E2E_REQUIRE=$require KIND_CLUSTER_NAME=$cluster KIND_MODE=$mode KIND_NODE_IMAGE=$node_image KUBECTL=$kubectl CONTAINER_TOOL=$container_tool npm run test:e2e
suite_rc=$?
set -e
if ((suite_rc == 0)); then suite_status=passed; else suite_status="failed (exit $suite_rc)"; fi
exit "$suite_rc"
