#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Starts a local control plane built from source (etcd, kube-apiserver, kube-controller-manager) on
# 127.0.0.1, then servicecidr-guard as local processes (two replicas behind a TCP round robin, as a
# Deployment's Pods behind their Service), and registers it as a validating webhook. No containers
# and no network beyond loopback: the apiserver calls the webhook by URL.
#
#   hack/local/up.sh                          everything, Kubernetes $DEFAULT_KUBE_VERSION
#   WEBHOOK=0 hack/local/up.sh                the control plane only
#   WEBHOOK=image hack/local/up.sh            the webhook from its container image (make image)
#   KUBE_VERSION=v1.34.4 hack/local/up.sh     another Kubernetes (built and cached on first use)
#   SHARED_RESERVATION=0 hack/local/up.sh     replicas that do not share reservations (the race run)
#
# Needs: the control plane binaries (hack/control-plane/build.sh builds them), npm ci (Node 24),
# openssl, curl, jq, ss; for WEBHOOK=image, docker and the image.
#
# Variables (all optional):
#   KUBE_VERSION         Kubernetes version (default: DEFAULT_KUBE_VERSION in hack/versions.env)
#   SERVICE_CIDR         --service-cluster-ip-range, becomes the default ServiceCIDR "kubernetes"
#                        (default 10.96.0.0/28: 14 usable addresses, as in the GKE walkthrough)
#   ENABLE_BETA          1 serves networking.k8s.io/v1beta1 (default 1 on 1.31-1.36; impossible on 1.37+)
#   WEBHOOK              1 starts and registers servicecidr-guard as a local process (default);
#                        image runs it from WEBHOOK_IMAGE as the Deployment does (read-only root, user
#                        65532, no capabilities; host network); 0 skips it
#   WEBHOOK_IMAGE        the image for WEBHOOK=image (default servicecidr-guard:<package.json version>)
#   POLICY               policy file for the webhook (default config/policies/gke-beta.yaml)
#   WEBHOOK_MANIFESTS    kustomize directory or manifest file holding the ValidatingWebhookConfiguration
#                        (default config/webhook)
#   CLUSTER_MANIFESTS    kustomize directory whose Namespace, ServiceAccount, RBAC and reservations Lease
#                        are applied (default config/default); the webhook then runs as that
#                        ServiceAccount, with exactly the permissions the manifests grant
#   WEBHOOK_REPLICAS     how many webhook processes (default 2); with 2 or more, a round robin
#                        (hack/local/round-robin-proxy.ts) listens on WEBHOOK_PORT and each replica on its own port
#   SHARED_RESERVATION   1 (default): the replicas record admitted ranges in the reservations Lease;
#                        0: each reserves on its own (serve --no-shared-reservation)
#   WEBHOOK_MAIN         built entry point to run (default dist/main.js)
#   WEBHOOK_BUILD        1 runs `npm run build` first (default), 0 uses dist/ as it is
#   LOCAL_DIR            state directory (default .local/ in the repository)
#   ETCD_CLIENT_PORT, ETCD_PEER_PORT, APISERVER_PORT, WEBHOOK_PORT, WEBHOOK_HEALTH_PORT
#                        defaults 22379, 22380, 26443, 29443, 29080: below the Linux ephemeral range
#                        (32768+) so outgoing connections never hold them, and off the usual 2379/6443
#                        so a real cluster on the same machine does not clash. WEBHOOK_PORT is where the
#                        apiserver calls (the round robin, or the one replica); replica N serves its
#                        health port on WEBHOOK_HEALTH_PORT + N - 1
#   WEBHOOK_REPLICA_PORT with 2+ replicas, replica N serves HTTPS on WEBHOOK_REPLICA_PORT + N - 1
#                        (default WEBHOOK_PORT + 1)
#
# Writes $LOCAL_DIR/env and $LOCAL_DIR/kubeconfig. Stop with hack/local/down.sh; restart one component
# with hack/local/ctl.sh.
set -euo pipefail

log_prefix=local-up
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=../versions.env
source "$here/../versions.env"

# Remember which settings the caller chose explicitly: only those are compared with a running plane.
declare -A requested=()
for v in KUBE_VERSION SERVICE_CIDR WEBHOOK WEBHOOK_REPLICAS SHARED_RESERVATION; do [[ -z ${!v+x} ]] || requested[$v]=${!v}; done

KUBE_VERSION=${KUBE_VERSION:-$DEFAULT_KUBE_VERSION}
SERVICE_CIDR=${SERVICE_CIDR:-10.96.0.0/28}
WEBHOOK=${WEBHOOK:-1}
POLICY=${POLICY:-$repo_root/config/policies/gke-beta.yaml}
WEBHOOK_MANIFESTS=${WEBHOOK_MANIFESTS:-$repo_root/config/webhook}
CLUSTER_MANIFESTS=${CLUSTER_MANIFESTS:-$repo_root/config/default}
WEBHOOK_REPLICAS=${WEBHOOK_REPLICAS:-2}
SHARED_RESERVATION=${SHARED_RESERVATION:-1}
WEBHOOK_MAIN=${WEBHOOK_MAIN:-$repo_root/dist/main.js}
WEBHOOK_BUILD=${WEBHOOK_BUILD:-1}
WEBHOOK_IMAGE=${WEBHOOK_IMAGE:-servicecidr-guard:$(jq -r .version "$repo_root/package.json")}
ETCD_CLIENT_PORT=${ETCD_CLIENT_PORT:-22379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-22380}
APISERVER_PORT=${APISERVER_PORT:-26443}
WEBHOOK_PORT=${WEBHOOK_PORT:-29443}
WEBHOOK_HEALTH_PORT=${WEBHOOK_HEALTH_PORT:-29080}
WEBHOOK_REPLICA_PORT=${WEBHOOK_REPLICA_PORT:-$((WEBHOOK_PORT + 1))}

usage_hint() {
  cat >&2 <<EOF

  export KUBECONFIG=$LOCAL_DIR/kubeconfig
  alias kubectl=$KUBECTL        # the kubectl built for $KUBE_VERSION
  kubectl get servicecidrs

  state and logs: $LOCAL_DIR (logs/*.log, env)
  restart one part: hack/local/ctl.sh restart apiserver|controller-manager|webhook|webhook-N|webhook-proxy
  stop:             hack/local/down.sh   (KEEP_STATE=1 keeps $LOCAL_DIR)
EOF
}

# --- Already up? -------------------------------------------------------------------------------------
if compgen -G "$LOCAL_DIR/pids/*" >/dev/null; then
  load_env
  running=() stopped=()
  for c in "${components[@]}"; do
    [[ -f $LOCAL_DIR/pids/$c ]] || continue
    if component_pid "$c" >/dev/null; then running+=("$c"); else stopped+=("$c"); fi
  done
  ((${#stopped[@]} == 0)) ||
    die "partly up: ${stopped[*]} stopped (running: ${running[*]:-none}). Start them with hack/local/ctl.sh start COMPONENT, or reset with hack/local/down.sh"
  # load_env has set KUBE_VERSION, SERVICE_CIDR, WEBHOOK, WEBHOOK_REPLICAS and SHARED_RESERVATION to
  # the running values.
  for v in "${!requested[@]}"; do
    [[ ${requested[$v]} == "${!v}" ]] ||
      die "already up with $v=${!v}, not ${requested[$v]}; run hack/local/down.sh first"
  done
  apiserver_ready || die "processes are running but kube-apiserver is not ready; see $LOCAL_DIR/logs/kube-apiserver.log"
  log "already up (${running[*]}): Kubernetes $KUBE_VERSION, ServiceCIDR $SERVICE_CIDR"
  usage_hint
  exit 0
fi

# --- Checks before touching anything -----------------------------------------------------------------
[[ $KUBE_VERSION =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || die "KUBE_VERSION must look like v1.37.2, got '$KUBE_VERSION'"
minor=${BASH_REMATCH[1]}
# ServiceCIDR is beta (v1beta1, behind MultiCIDRServiceAllocator) from 1.31, GA (v1) from 1.33, and
# v1beta1 is removed in 1.37 (KUBERNETES-NOTES.md).
((minor >= 31)) || die "ServiceCIDR needs Kubernetes 1.31 or later (v1beta1); $KUBE_VERSION is older"
if ((minor <= 32)); then
  ENABLE_BETA=${ENABLE_BETA:-1}
  [[ $ENABLE_BETA == 1 ]] || die "Kubernetes 1.$minor serves ServiceCIDR only as v1beta1; ENABLE_BETA=0 leaves nothing to test"
elif ((minor <= 36)); then
  ENABLE_BETA=${ENABLE_BETA:-1}
else
  ENABLE_BETA=${ENABLE_BETA:-0}
  [[ $ENABLE_BETA == 0 ]] || die "networking.k8s.io/v1beta1 is removed in Kubernetes 1.37; use KUBE_VERSION=$BETA_KUBE_VERSION for it"
fi

[[ $WEBHOOK_REPLICAS =~ ^[1-9][0-9]*$ ]] || die "WEBHOOK_REPLICAS must be a positive number, got '$WEBHOOK_REPLICAS'"
[[ $SHARED_RESERVATION =~ ^[01]$ ]] || die "SHARED_RESERVATION must be 1 or 0, got '$SHARED_RESERVATION'"
# Replica N (1-based) serves HTTPS on replica_ports[N-1] and plain HTTP on health_ports[N-1]. One
# replica listens where the apiserver calls; several sit behind the round robin there.
replica_ports=() health_ports=()
for ((i = 0; i < WEBHOOK_REPLICAS; i++)); do
  if ((WEBHOOK_REPLICAS == 1)); then replica_ports+=("$WEBHOOK_PORT"); else replica_ports+=($((WEBHOOK_REPLICA_PORT + i))); fi
  health_ports+=($((WEBHOOK_HEALTH_PORT + i)))
done
WEBHOOK_REPLICA_PORTS=$(IFS=,; echo "${replica_ports[*]}")
WEBHOOK_HEALTH_PORTS=$(IFS=,; echo "${health_ports[*]}")

ports=("$ETCD_CLIENT_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT")
[[ $WEBHOOK =~ ^(0|1|image)$ ]] || die "WEBHOOK must be 1 (local processes), image (the container image) or 0 (none), not '$WEBHOOK'"
if [[ $WEBHOOK != 0 ]]; then
  ports+=("${replica_ports[@]}" "${health_ports[@]}")
  ((WEBHOOK_REPLICAS == 1)) || ports+=("$WEBHOOK_PORT")
fi
[[ $(printf '%s\n' "${ports[@]}" | sort | uniq -d) == '' ]] || die "two components would share a port: ${ports[*]}"
for p in "${ports[@]}"; do
  [[ -z $(ss -Hltn "sport = :$p") ]] || die "port $p is already in use on this machine; choose others (see the port variables at the top of $0)"
done

if [[ $WEBHOOK == image ]]; then
  docker=$(command -v docker) || die "WEBHOOK=image needs the docker CLI (make container-engine)"
  "$docker" image inspect "$WEBHOOK_IMAGE" >/dev/null 2>&1 || die "image $WEBHOOK_IMAGE not found: make image IMG=$WEBHOOK_IMAGE"
fi
if [[ $WEBHOOK != 0 ]]; then
  node=$repo_root/node_modules/.bin/node
  [[ -x $node ]] || die "$node not found: run npm ci (the webhook runs on npm's Node 24, not the system node)"
  [[ $("$node" --version) == v24.* ]] || die "$node is $("$node" --version), expected Node 24"
  [[ -f $POLICY ]] || die "policy file $POLICY not found (set POLICY=...)"
  [[ -e $WEBHOOK_MANIFESTS ]] ||
    die "$WEBHOOK_MANIFESTS not found: the ValidatingWebhookConfiguration comes from config/webhook (set WEBHOOK_MANIFESTS=DIR|FILE, or WEBHOOK=0 for the control plane only)"
  [[ -d $CLUSTER_MANIFESTS ]] ||
    die "$CLUSTER_MANIFESTS not found: the webhook's ServiceAccount, RBAC and reservations Lease come from config/default (set CLUSTER_MANIFESTS=DIR)"
fi

# A fresh state directory every time, so no run inherits another's certificates or etcd data. Only a
# directory that we created (it holds the marker) is ever wiped.
if [[ -d $LOCAL_DIR && ! -f $marker && -n $(ls -A "$LOCAL_DIR") ]]; then
  die "$LOCAL_DIR exists, is not empty and was not made by local-up; refusing to wipe it (set LOCAL_DIR)"
fi
rm -rf "$LOCAL_DIR"
mkdir -p "$LOCAL_DIR"/{pki,etcd,apiserver,cmd,pids,logs,containers}
touch "$marker"
t0=$(date +%s.%N)

# On any failure: stop exactly what this run started, keep the logs for reading.
started=()
on_exit() {
  local rc=$?
  ((rc == 0)) && return
  log "failed; stopping what was started (${started[*]:-nothing})"
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do stop_component "${started[i]}"; done
  log "logs kept in $LOCAL_DIR/logs; hack/local/down.sh removes $LOCAL_DIR"
}
trap on_exit EXIT

# launch COMPONENT ARGV...: record the command line, start it, wait until it is usable.
launch() {
  local c=$1 t
  shift
  save_command "$c" "$@"
  log "starting $c"
  t=$(date +%s.%N)
  start_component "$c"
  started+=("$c")
  wait_ready "$c"
  log "$c ready in $(since "$t")s"
}

# since T0: seconds elapsed since T0 (from date +%s.%N), one decimal.
since() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }'; }

# --- Binaries ----------------------------------------------------------------------------------------
bin_dir=$("$here/../control-plane/build.sh" "$KUBE_VERSION")
KUBECTL=$bin_dir/kubectl
ETCD_VERSION=$(sed -n 's/.*etcd=\([^ ]*\).*/\1/p' "$bin_dir/VERSION")

# --- The webhook's objects and identity, from the manifests ------------------------------------------
# The Namespace, ServiceAccount, RBAC and reservations Lease of CLUSTER_MANIFESTS (the kinds the
# apiserver serves without CRDs), as a JSON List, applied once the apiserver is up. The webhook runs
# as that ServiceAccount (a client certificate whose user name is the ServiceAccount's), so it holds
# exactly the permissions a cluster would give it, and updates the Lease the manifests create.
if [[ $WEBHOOK != 0 ]]; then
  "$KUBECTL" kustomize "$CLUSTER_MANIFESTS" >"$LOCAL_DIR/cluster-manifests.yaml"
  "$node" "$repo_root/hack/manifests/objects.ts" "$LOCAL_DIR/cluster-manifests.yaml" \
    Namespace ServiceAccount ClusterRole ClusterRoleBinding Role RoleBinding Lease >"$LOCAL_DIR/cluster-objects.json"
  service_account=$(jq -r '[.items[] | select(.kind == "ServiceAccount")] |
    if length == 1 then "\(.[0].metadata.namespace):\(.[0].metadata.name)" else error("expected one ServiceAccount in the manifests, found \(length)") end' \
    "$LOCAL_DIR/cluster-objects.json")
  reservation_lease=$(jq -r '[.items[] | select(.kind == "Lease")] |
    if length == 1 then "\(.[0].metadata.namespace)/\(.[0].metadata.name)" else error("expected one Lease in the manifests, found \(length)") end' \
    "$LOCAL_DIR/cluster-objects.json")
fi

# --- Certificates ------------------------------------------------------------------------------------
# Two CAs: the cluster CA signs the apiserver's serving cert and every client cert; the webhook CA signs
# only the webhook's serving cert and is what the apiserver trusts through caBundle, as with cert-manager.
pki=$LOCAL_DIR/pki
umask 077

# new_key FILE: an ECDSA P-256 key; small, fast, accepted by Go and Node alike.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# new_ca NAME CN: a self-signed CA, NAME.crt and NAME.key.
new_ca() {
  new_key "$pki/$1.key"
  openssl req -new -key "$pki/$1.key" -subj "/CN=$2" |
    openssl x509 -req -signkey "$pki/$1.key" -days 365 -out "$pki/$1.crt" -extfile <(
      echo "basicConstraints=critical,CA:TRUE"
      echo "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
      echo "subjectKeyIdentifier=hash"
    ) 2>/dev/null
}

# new_cert NAME CA SUBJECT serverAuth|clientAuth [SAN]: NAME.crt and NAME.key signed by CA.
new_cert() {
  local name=$1 ca=$2 subject=$3 usage=$4 san=${5:-}
  new_key "$pki/$name.key"
  openssl req -new -key "$pki/$name.key" -subj "$subject" |
    openssl x509 -req -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 365 -out "$pki/$name.crt" -extfile <(
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$usage"
        echo "authorityKeyIdentifier=keyid"
        [[ -z $san ]] || echo "subjectAltName=$san"
      ) 2>/dev/null
}

log "generating certificates in $pki"
new_ca ca "servicecidr-guard local cluster CA"
new_cert apiserver ca "/CN=kube-apiserver" serverAuth "IP:127.0.0.1,DNS:localhost"
new_cert admin ca "/O=system:masters/CN=admin" clientAuth
# kube-controller-manager runs as itself; with --use-service-account-credentials each controller then
# acts as its own service account (service-cidrs-controller), as in a kubeadm cluster, so the webhook
# sees the finalizer patches from the same user it would see in production.
new_cert controller-manager ca "/CN=system:kube-controller-manager" clientAuth
# The webhook's client certificate names its ServiceAccount, as the token in a Pod would.
if [[ $WEBHOOK != 0 ]]; then
  new_cert webhook-client ca "/O=system:serviceaccounts/O=system:serviceaccounts:${service_account%%:*}/CN=system:serviceaccount:$service_account" clientAuth
fi
new_ca webhook-ca "servicecidr-guard local webhook CA"
new_cert webhook webhook-ca "/CN=servicecidr-guard-webhook.servicecidr-guard-system.svc" serverAuth \
  "IP:127.0.0.1,DNS:localhost,DNS:servicecidr-guard-webhook.servicecidr-guard-system.svc"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/service-account.key" 2>/dev/null
openssl pkey -in "$pki/service-account.key" -pubout -out "$pki/service-account.pub"
umask 022

# write_kubeconfig FILE USER: embeds the certificates so the file can be copied anywhere.
write_kubeconfig() {
  local k=("$KUBECTL" config --kubeconfig "$1")
  "${k[@]}" set-cluster local --server "https://127.0.0.1:$APISERVER_PORT" \
    --certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
  "${k[@]}" set-credentials "$2" --client-certificate "$pki/$2.crt" --client-key "$pki/$2.key" --embed-certs >/dev/null
  "${k[@]}" set-context local --cluster local --user "$2" >/dev/null
  "${k[@]}" use-context local >/dev/null
  chmod 600 "$1"
}
write_kubeconfig "$LOCAL_DIR/kubeconfig" admin
write_kubeconfig "$LOCAL_DIR/controller-manager.kubeconfig" controller-manager
[[ $WEBHOOK == 0 ]] || write_kubeconfig "$LOCAL_DIR/webhook.kubeconfig" webhook-client

# env is written before the components start: local/ctl.sh and the wait helpers read it.
# env_var NAME VALUE: one line of $LOCAL_DIR/env. %q quotes only what a shell would need quoted, and an
# empty value is left bare, so the e2e suite can read the file with a simple KEY=value parser.
env_var() { if [[ -n $2 ]]; then printf '%s=%q\n' "$1" "$2"; else printf '%s=\n' "$1"; fi; }

write_env() {
  {
    env_var KUBECONFIG "$LOCAL_DIR/kubeconfig"
    env_var KUBECTL "$KUBECTL"
    env_var BIN_DIR "$bin_dir"
    env_var KUBE_VERSION "$KUBE_VERSION"
    env_var ETCD_VERSION "$ETCD_VERSION"
    env_var SERVICE_CIDR "$SERVICE_CIDR"
    env_var ENABLE_BETA "$ENABLE_BETA"
    env_var WEBHOOK "$WEBHOOK"
    env_var WEBHOOK_REPLICAS "$WEBHOOK_REPLICAS"
    env_var SHARED_RESERVATION "$SHARED_RESERVATION"
    env_var LOCAL_DIR "$LOCAL_DIR"
    env_var APISERVER_AUDIT_LOG "$LOCAL_DIR/logs/audit.log"
    env_var ETCD_CLIENT_PORT "$ETCD_CLIENT_PORT"
    env_var ETCD_PEER_PORT "$ETCD_PEER_PORT"
    env_var APISERVER_PORT "$APISERVER_PORT"
    env_var APISERVER_URL "https://127.0.0.1:$APISERVER_PORT"
    env_var CA_CERT "$pki/ca.crt"
    env_var WEBHOOK_PORT "$WEBHOOK_PORT"
    env_var WEBHOOK_HEALTH_PORT "$WEBHOOK_HEALTH_PORT"
    env_var WEBHOOK_HEALTH_PORTS "$WEBHOOK_HEALTH_PORTS"
    env_var WEBHOOK_REPLICA_PORTS "$WEBHOOK_REPLICA_PORTS"
    env_var WEBHOOK_KUBECONFIG "$LOCAL_DIR/webhook.kubeconfig"
    env_var RESERVATION_LEASE "${reservation_lease:-}"
    env_var WEBHOOK_URL "https://127.0.0.1:$WEBHOOK_PORT/validate"
    env_var WEBHOOK_CA_CERT "$pki/webhook-ca.crt"
    env_var WEBHOOK_CONFIGURATIONS "${webhook_configurations:-}"
    env_var WEBHOOK_POLICY "${webhook_policy:-}"
    env_var WEBHOOK_IMAGE "$([[ $WEBHOOK == image ]] && echo "$WEBHOOK_IMAGE")"
    local c pid
    load_components
    for c in "${components[@]}"; do
      pid=''
      [[ -f $LOCAL_DIR/pids/$c ]] && read -r pid _ <"$LOCAL_DIR/pids/$c"
      env_var "$(tr a-z- A-Z_ <<<"$c")_PID" "$pid"
    done
  } >"$LOCAL_DIR/env"
}
write_env

# --- Version-dependent flags, checked against the binaries -------------------------------------------
apiserver_version_flags=() controller_manager_version_flags=()
if ((minor <= 32)); then
  # Beta and off by default on 1.31/1.32; locked on from 1.34 and removed by 1.37, so never passed there.
  for b in kube-apiserver kube-controller-manager; do
    [[ $("$bin_dir/$b" --help 2>&1) == *MultiCIDRServiceAllocator=* ]] ||
      die "$b $KUBE_VERSION does not list the MultiCIDRServiceAllocator feature gate"
  done
  apiserver_version_flags+=(--feature-gates=MultiCIDRServiceAllocator=true)
  controller_manager_version_flags+=(--feature-gates=MultiCIDRServiceAllocator=true)
fi
if [[ $ENABLE_BETA == 1 ]]; then
  apiserver_version_flags+=(--runtime-config=networking.k8s.io/v1beta1=true)
fi

# --- etcd --------------------------------------------------------------------------------------------
# The data is thrown away with the directory, so fsync buys nothing and costs seconds per start.
launch etcd "$bin_dir/etcd" \
  --name=local \
  --data-dir="$LOCAL_DIR/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --advertise-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="local=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync

# --- kube-apiserver ----------------------------------------------------------------------------------
# envtest's flags (KUBERNETES-NOTES.md). --advertise-address: without it start-up looks for a default
# route and fails on a machine that has none. --endpoint-reconciler-type=none: no kube-proxy or
# kubelet here, nothing would use the endpoints. ServiceAccount admission is off because no
# controller creates the default service accounts it would require.
# --shutdown-watch-termination-grace-period: only with a positive value does the apiserver end open
# watches when it shuts down (k8s.io/apiserver filters.WithWatchTerminationDuringShutdown); without it
# the watches of kube-controller-manager and the webhook hold a SIGTERM for the whole 60 s
# shutdown timeout, and every apiserver restart in the e2e suite would cost a minute.
# --audit-*: ServiceCIDR requests are audited (hack/audit-policy.yaml) to logs/audit.log, where
# the e2e suite finds the annotations the webhook adds.
launch kube-apiserver "$bin_dir/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --advertise-address=127.0.0.1 \
  --bind-address=127.0.0.1 \
  --secure-port="$APISERVER_PORT" \
  --cert-dir="$LOCAL_DIR/apiserver" \
  --tls-cert-file="$pki/apiserver.crt" \
  --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" \
  --authorization-mode=RBAC \
  --service-account-issuer="https://127.0.0.1:$APISERVER_PORT" \
  --service-account-key-file="$pki/service-account.pub" \
  --service-account-signing-key-file="$pki/service-account.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --disable-admission-plugins=ServiceAccount \
  --endpoint-reconciler-type=none \
  --shutdown-watch-termination-grace-period=5s \
  --audit-policy-file="$repo_root/hack/audit-policy.yaml" \
  --audit-log-path="$LOCAL_DIR/logs/audit.log" \
  "${apiserver_version_flags[@]}"
write_env

# --- kube-controller-manager -------------------------------------------------------------------------
# Only the controller that finalizes and deletes ServiceCIDRs. --secure-port=0: nothing scrapes it, and
# it then needs no serving certificate or delegated authn/authz.
launch kube-controller-manager "$bin_dir/kube-controller-manager" \
  --kubeconfig="$LOCAL_DIR/controller-manager.kubeconfig" \
  --controllers=service-cidr-controller \
  --use-service-account-credentials=true \
  --leader-elect=false \
  --secure-port=0 \
  "${controller_manager_version_flags[@]}"
wait_until kube-controller-manager 60 "the ServiceCIDR finalizer on 'kubernetes'" controller_manager_working
write_env

# --- servicecidr-guard -------------------------------------------------------------------------------
# webhook_argv N: the command line of replica N (component webhook-N), a local process or its image,
# with the same flags either way; built here and only here. Each replica runs as the manifests'
# ServiceAccount (webhook.kubeconfig), so it holds exactly the permissions a cluster would give it.
webhook_argv() {
  local n=$1 name
  local flags=(--host 127.0.0.1 --port "${replica_ports[n - 1]}" --health-port "${health_ports[n - 1]}"
    --reservation-lease "$reservation_lease")
  [[ $SHARED_RESERVATION == 1 ]] || flags+=(--no-shared-reservation)
  if [[ $WEBHOOK == 1 ]]; then
    webhook_cmd=("$node" "$WEBHOOK_MAIN" serve --policy "$POLICY" --tls-cert "$pki/webhook.crt" --tls-key "$pki/webhook.key"
      --kubeconfig "$LOCAL_DIR/webhook.kubeconfig" "${flags[@]}")
    return
  fi
  # `docker run` stays attached, so it is the process local/ctl.sh starts and stops: it passes
  # SIGTERM on to the server (--sig-proxy, the default) and exits with its code.
  name=scg-local-webhook-${replica_ports[n - 1]}
  echo "$name" >"$LOCAL_DIR/containers/webhook-$n"
  webhook_cmd=("$docker" run --rm --name "$name" --network host
    --read-only --user 65532:65532 --group-add "$(id -g)" --cap-drop ALL --security-opt no-new-privileges
    -e "NODE_OPTIONS=$node_options" -v "$image_mount:/etc/servicecidr-guard:ro" "$WEBHOOK_IMAGE" serve
    --policy /etc/servicecidr-guard/policy/policy.yaml --tls-cert /etc/servicecidr-guard/webhook.crt
    --tls-key /etc/servicecidr-guard/webhook.key --kubeconfig /etc/servicecidr-guard/kubeconfig "${flags[@]}")
}

# prepare_image_mount: for WEBHOOK=image, what a Pod mounts (policy ConfigMap, TLS Secret, service
# account identity) as one folder readable by our group, which the containers join: the private keys
# are never world-readable. The containers run as config/manager/manager.yaml runs them: user 65532,
# read-only root, no capabilities, the Deployment's NODE_OPTIONS; the host network lets them reach
# the apiserver on 127.0.0.1 and serve there. Every replica reads the one policy copy.
prepare_image_mount() {
  image_mount=$LOCAL_DIR/webhook
  mkdir -p "$image_mount/policy"
  cp "$POLICY" "$image_mount/policy/policy.yaml"
  cp "$pki/webhook.crt" "$pki/webhook.key" "$image_mount/"
  cp "$LOCAL_DIR/webhook.kubeconfig" "$image_mount/kubeconfig"
  chmod 0750 "$image_mount" "$image_mount/policy"
  chmod 0640 "$image_mount/policy/policy.yaml" "$image_mount/webhook.crt" "$image_mount/webhook.key" "$image_mount/kubeconfig"
  webhook_policy=$image_mount/policy/policy.yaml
  node_options=$(awk '/name: NODE_OPTIONS/ { getline; sub(/.*value: */, ""); print; exit }' "$repo_root/config/manager/manager.yaml")
  write_env
}

if [[ $WEBHOOK != 0 ]]; then
  if [[ $WEBHOOK == 1 && $WEBHOOK_BUILD == 1 ]]; then
    log "npm run build"
    (cd "$repo_root" && npm run --silent build) >"$LOCAL_DIR/logs/build.log" 2>&1 ||
      { LOG_TAIL_LINES=30 tail_log build; die "npm run build failed"; }
  fi
  [[ $WEBHOOK == image || -f $WEBHOOK_MAIN ]] || die "$WEBHOOK_MAIN not found after the build"

  log "applying the webhook's Namespace, ServiceAccount, RBAC and reservations Lease from $CLUSTER_MANIFESTS"
  "$KUBECTL" --kubeconfig "$LOCAL_DIR/kubeconfig" apply -f "$LOCAL_DIR/cluster-objects.json" >&2

  [[ $WEBHOOK != image ]] || prepare_image_mount
  # launch_webhook_replica N: starts replica N (component webhook-N) and waits for its /readyz.
  launch_webhook_replica() {
    webhook_argv "$1"
    launch "webhook-$1" "${webhook_cmd[@]}"
  }
  for ((n = 1; n <= WEBHOOK_REPLICAS; n++)); do launch_webhook_replica "$n"; done
  # Several replicas: one address for the apiserver, a new connection to each replica in turn.
  if ((WEBHOOK_REPLICAS > 1)); then
    proxy_cmd=("$node" "$repo_root/hack/local/round-robin-proxy.ts" --listen "127.0.0.1:$WEBHOOK_PORT")
    for p in "${replica_ports[@]}"; do proxy_cmd+=(--backend "127.0.0.1:$p"); done
    launch webhook-proxy "${proxy_cmd[@]}"
  fi
  write_env

  # Register it from the real manifests, rewritten for a local process: the apiserver reaches the webhook
  # by URL (a `service:` reference needs kube-proxy), and trusts our webhook CA directly instead of a
  # caBundle injected by cert-manager.
  log "registering the webhook from $WEBHOOK_MANIFESTS"
  if [[ -d $WEBHOOK_MANIFESTS ]]; then
    "$KUBECTL" kustomize "$WEBHOOK_MANIFESTS" >"$LOCAL_DIR/webhook-manifests.yaml"
  else
    cp "$WEBHOOK_MANIFESTS" "$LOCAL_DIR/webhook-manifests.yaml"
  fi
  # A client-side dry run turns multi-document YAML into a stream of JSON objects (it needs the
  # apiserver only for discovery); jq --slurp reads them all at once.
  "$KUBECTL" --kubeconfig "$LOCAL_DIR/kubeconfig" create --dry-run=client -o json \
    -f "$LOCAL_DIR/webhook-manifests.yaml" |
    jq --slurp --arg url "https://127.0.0.1:$WEBHOOK_PORT/validate" --arg ca "$(base64 -w0 <"$pki/webhook-ca.crt")" '
      [.[] | if .kind == "List" then .items[] else . end | select(.kind == "ValidatingWebhookConfiguration")]
      | if length == 0 then error("no ValidatingWebhookConfiguration in the manifests") else . end
      | map(del(.metadata.annotations["cert-manager.io/inject-ca-from"])
            | if .metadata.annotations == {} then del(.metadata.annotations) else . end
            | .webhooks |= map(.clientConfig = {url: $url, caBundle: $ca}))
      | {apiVersion: "v1", kind: "List", items: .}' >"$LOCAL_DIR/webhook-configuration.json"
  "$KUBECTL" --kubeconfig "$LOCAL_DIR/kubeconfig" apply -f "$LOCAL_DIR/webhook-configuration.json" >&2
  webhook_configurations=$(jq -r '[.items[].metadata.name] | join(",")' "$LOCAL_DIR/webhook-configuration.json")
  write_env
fi

trap - EXIT
webhook_summary=off
if [[ $WEBHOOK != 0 ]]; then
  webhook_summary="https://127.0.0.1:$WEBHOOK_PORT/validate, $WEBHOOK_REPLICAS replica(s) $([[ $WEBHOOK == image ]] && echo "from image $WEBHOOK_IMAGE" || echo "as local processes"), shared reservations $([[ $SHARED_RESERVATION == 1 ]] && echo "in Lease $reservation_lease" || echo OFF)"
fi
log "up in $(since "$t0")s: Kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, ServiceCIDR $SERVICE_CIDR, webhook $webhook_summary"
usage_hint
