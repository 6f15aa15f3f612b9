#!/usr/bin/env bash
# Runs the built image itself (make image-verify) as the Deployment runs it, against a local
# kube-apiserver, and checks what users rely on:
#   1. the process runs as UID/GID 65532 with no capabilities, on a read-only root file system
#      (read from the running process's /proc status, not only from `docker inspect`);
#   2. /readyz answers 200 once its cache has synced with the local control plane; the time from
#      `docker run` to that answer is printed;
#   3. reviews are decided over HTTPS: a CREATE outside the policy's ranges is denied, one inside is
#      allowed, both echo the request uid;
#   4. on SIGTERM it drains and exits 0 within the Deployment's terminationGracePeriodSeconds (read
#      from config/manager/manager.yaml), less the preStop sleep that comes first in a Pod.
# Prints the image size and the figures.
#
#   hack/images/verify.sh                       IMG=servicecidr-guard:<package.json version>
#
# The contents and identity checks report every failure they find, then fail. VERIFY_WEAKEN (a
# comma-separated list of user, cap-drop, no-new-privileges, read-only) leaves that protection out
# of `docker run`: only hack/images/verify-negative.sh sets it, to show that each check fails when
# its guarantee is gone.
#
# A throwaway control plane (hack/local/up.sh WEBHOOK=0) is started in $OUT/local on its own ports
# (VERIFY_PORT_BASE, default 23000: etcd +379/+380, apiserver +443, webhook +543, health +80) and
# stopped afterwards. Needs: a Docker engine and the image (make image), the control plane binaries
# (make control-plane), openssl, curl, jq.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
log() { printf '[image-verify] %s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
# problem MESSAGE: a failed check, reported now; `checked` then fails if there was any.
problems=()
problem() { problems+=("$*"); log "FAIL: $*"; }
checked() { ((${#problems[@]} == 0)) || die "$1: ${#problems[@]} check(s) failed"; }

version=$(jq -r .version package.json)
img=${IMG:-servicecidr-guard:$version}
out=${OUT:-$repo/_output/image-verify}
base=${VERIFY_PORT_BASE:-23000}
webhook_port=$((base + 543)) health_port=$((base + 80))
container=scg-image-verify-$base

docker image inspect "$img" >/dev/null 2>&1 || die "image $img not found: run make image"
rm -rf "$out"
mkdir -p "$out/mount"

stop_all() {
  local status=$?
  docker rm -f "$container" >/dev/null 2>&1 || true
  LOCAL_DIR=$out/local "$repo/hack/local/down.sh" >/dev/null 2>&1 || true
  exit "$status"
}
trap stop_all EXIT

# 0. What the image holds: /app is dist/, production node_modules and package.json, nothing else; no
# package the lockfile marks dev-only; no shell, no package manager.
log "contents of $img"
docker create --name "$container" "$img" >/dev/null
docker export "$container" | tar -t >"$out/files"
docker rm "$container" >/dev/null
extra=$(sed -n 's#^app/\([^/]*\).*#\1#p' "$out/files" | sort -u | grep -vxE 'node_modules|dist|package.json|' || true)
[[ -z $extra ]] || problem "unexpected entries in /app: $(tr '\n' ' ' <<<"$extra")"
mapfile -t dev_paths < <(jq -r '.packages | to_entries[] | select(.value.dev == true) | .key' package-lock.json)
((${#dev_paths[@]} > 0)) || die "the lockfile lists no dev-only package: nothing to check"
present=$(printf 'app/%s/\n' "${dev_paths[@]}" | grep -xFf - "$out/files" || true)
[[ -z $present ]] || problem "dev-only packages in the image: $(tr '\n' ' ' <<<"$present")"
for forbidden in bin/sh usr/bin/sh bin/bash usr/bin/bash usr/bin/apt usr/bin/dpkg usr/local/bin/npm; do
  ! grep -qx "$forbidden" "$out/files" || problem "the runtime image contains /$forbidden"
done
checked "contents of $img"
log "contents: /app holds dist, node_modules ($(grep -c '^app/node_modules/.*[^/]$' "$out/files") files) and package.json; none of the ${#dev_paths[@]} dev-only packages; no shell or package manager"

log "control plane (WEBHOOK=0) on ports $base+"
WEBHOOK=0 LOCAL_DIR=$out/local ETCD_CLIENT_PORT=$((base + 379)) ETCD_PEER_PORT=$((base + 380)) \
  APISERVER_PORT=$((base + 443)) "$repo/hack/local/up.sh" 2>"$out/local-up.log" ||
  { tail -n 30 "$out/local-up.log" >&2; die "local control plane did not start"; }

# The objects the Deployment relies on in the cluster: its Namespace and the shared reservations
# Lease (config/manager/reservations.yaml), from the same kustomization users apply.
kubectl=$(sed -n 's/^KUBECTL=//p' "$out/local/env")
"$kubectl" kustomize config/default >"$out/default.yaml"
node_modules/.bin/node hack/manifests/objects.ts "$out/default.yaml" Namespace Lease >"$out/cluster-objects.json"
namespace=$(jq -r '[.items[] | select(.kind == "Lease")] | if length == 1 then .[0].metadata.namespace else error("expected one Lease in config/default") end' "$out/cluster-objects.json")
"$kubectl" --kubeconfig "$out/local/kubeconfig" apply -f "$out/cluster-objects.json" >/dev/null

# What the Pod mounts, readable by the image's user: the policy (a ConfigMap in a Pod), a serving
# certificate (the cert-manager Secret) and a kubeconfig (the service account in a Pod). Files,
# not symlinks out of the folder: the container sees only the mount.
mount=$out/mount
cp config/policies/gke-beta.yaml "$mount/policy.yaml"
cp "$out/local/kubeconfig" "$mount/kubeconfig"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout "$mount/tls.key" -out "$mount/tls.crt" 2>/dev/null
# Group-readable by our own group, which the container joins (--group-add): never world-readable.
chmod 0750 "$mount"
chmod 0640 "$mount"/*

# The Deployment's shutdown budget.
grace=$(sed -n 's/^ *terminationGracePeriodSeconds: *\([0-9]*\).*/\1/p' config/manager/manager.yaml)
prestop=$(awk '/preStop:/ { p = 1 } p && /seconds:/ { print $2; exit }' config/manager/manager.yaml)
node_options=$(awk '/name: NODE_OPTIONS/ { getline; sub(/.*value: */, ""); print; exit }' config/manager/manager.yaml)
[[ -n $grace && -n $prestop ]] || die "could not read terminationGracePeriodSeconds / preStop from config/manager/manager.yaml"

# What the Deployment's securityContext sets, less what VERIFY_WEAKEN leaves out.
protections=()
weaken=",${VERIFY_WEAKEN:-},"
for protection in user cap-drop no-new-privileges read-only; do
  [[ $weaken != *",$protection,"* ]] || { log "VERIFY_WEAKEN: without $protection"; continue; }
  case $protection in
    user) protections+=(--user 65532:65532) ;;
    cap-drop) protections+=(--cap-drop ALL) ;;
    no-new-privileges) protections+=(--security-opt no-new-privileges) ;;
    read-only) protections+=(--read-only) ;;
  esac
done
log "docker run $img (${protections[*]}, POD_NAMESPACE=$namespace)"
started=$(date +%s%N)
docker run -d --name "$container" --network host \
  "${protections[@]}" --group-add "$(id -g)" \
  -e NODE_OPTIONS="$node_options" -e POD_NAMESPACE="$namespace" \
  -v "$mount:/etc/servicecidr-guard:ro" "$img" serve \
  --policy /etc/servicecidr-guard/policy.yaml --tls-cert /etc/servicecidr-guard/tls.crt \
  --tls-key /etc/servicecidr-guard/tls.key --kubeconfig /etc/servicecidr-guard/kubeconfig \
  --host 127.0.0.1 --port "$webhook_port" --health-port "$health_port" --shutdown-delay 1 --shutdown-timeout 10 >/dev/null

ready_ms=''
for _ in $(seq 600); do
  [[ $(docker inspect -f '{{.State.Running}}' "$container") == true ]] || { docker logs "$container" >&2; die "the container exited"; }
  if [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$health_port/readyz") == 200 ]]; then
    ready_ms=$((($(date +%s%N) - started) / 1000000))
    break
  fi
  sleep 0.05
done
[[ -n $ready_ms ]] || { docker logs "$container" >&2; die "/readyz not 200 within 30 s"; }
log "ready: /readyz 200 after $ready_ms ms"

# 1. Who the process is, as the kernel sees it.
pid=$(docker inspect -f '{{.State.Pid}}' "$container")
uid=$(awk '/^Uid:/ { print $2 "/" $3 "/" $4 "/" $5 }' "/proc/$pid/status")
gid=$(awk '/^Gid:/ { print $2 }' "/proc/$pid/status")
caps=$(awk '/^Cap(Eff|Prm|Bnd|Amb):/ { printf "%s=%s ", $1, $2 }' "/proc/$pid/status")
nnp=$(awk '/^NoNewPrivs:/ { print $2 }' "/proc/$pid/status")
[[ $uid == 65532/65532/65532/65532 ]] || problem "process UIDs are $uid, expected 65532"
[[ $gid == 65532 ]] || problem "process GID is $gid, expected 65532"
[[ $caps == "CapPrm:=0000000000000000 CapEff:=0000000000000000 CapBnd:=0000000000000000 CapAmb:=0000000000000000 " ]] ||
  problem "capabilities left: $caps"
[[ $nnp == 1 ]] || problem "NoNewPrivs is $nnp"
# Read-only as the process sees it: its root mount's options in its own mountinfo.
root_options=$(awk '$5 == "/" { print $6; exit }' "/proc/$pid/mountinfo")
[[ $root_options == ro || $root_options == ro,* ]] || problem "root file system is writable (mount options $root_options)"
# The image's own default user, for a runtime that ignores the Pod's securityContext.
image_user=$(docker image inspect -f '{{.Config.User}}' "$img")
[[ $image_user == 65532:65532 ]] || problem "image USER is '$image_user', not 65532:65532"
checked "identity"
log "identity: uid 65532, gid 65532, no capabilities, no-new-privileges, read-only root"

# 3. Reviews.
review() {
  jq -n --arg uid "$1" --arg name "$2" --arg cidr "$3" '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
    request: {uid: $uid, kind: {group: "networking.k8s.io", version: "v1", kind: "ServiceCIDR"},
      resource: {group: "networking.k8s.io", version: "v1", resource: "servicecidrs"}, name: $name, operation: "CREATE",
      userInfo: {username: "image-verify"}, object: {apiVersion: "networking.k8s.io/v1", kind: "ServiceCIDR",
      metadata: {name: $name}, spec: {cidrs: [$cidr]}}, dryRun: false}}' |
    curl -sS --cacert "$mount/tls.crt" -H 'Content-Type: application/json' --data-binary @- \
      "https://127.0.0.1:$webhook_port/validate"
}
denied=$(review 11111111-1111-4111-8111-111111111111 outside 10.100.0.0/24)
jq -e '.response.uid == "11111111-1111-4111-8111-111111111111" and .response.allowed == false and (.response.status.message | contains("outside the allowed IPv4 ranges"))' <<<"$denied" >/dev/null ||
  die "the out-of-policy CREATE was not denied as expected: $denied"
allowed=$(review 22222222-2222-4222-8222-222222222222 inside 34.118.224.0/24)
jq -e '.response.uid == "22222222-2222-4222-8222-222222222222" and .response.allowed == true' <<<"$allowed" >/dev/null ||
  die "the in-policy CREATE was not allowed: $allowed"
log "reviews: 10.100.0.0/24 denied ($(jq -r .response.status.message <<<"$denied" | cut -c1-90)...), 34.118.224.0/24 allowed"

# 4. SIGTERM: drain and exit 0 inside the grace period left after preStop.
budget=$((grace - prestop))
t0=$(date +%s%N)
docker kill --signal TERM "$container" >/dev/null
timeout "$budget" docker wait "$container" >"$out/exit-code" || die "still running $budget s after SIGTERM (grace $grace s - preStop $prestop s)"
stop_ms=$((($(date +%s%N) - t0) / 1000000))
code=$(cat "$out/exit-code")
docker logs "$container" >"$out/container.log" 2>&1
[[ $code == 0 ]] || { tail -n 20 "$out/container.log" >&2; die "exit code $code after SIGTERM"; }
grep -q '"msg":"stopped"' "$out/container.log" || die "no 'stopped' log line: the server did not shut down in order"
log "SIGTERM: exited 0 after $stop_ms ms (budget ${budget} s = grace $grace s - preStop $prestop s)"

size=$(docker image inspect -f '{{.Size}}' "$img")
log "PASS: $img $(numfmt --to=iec-i --suffix=B "$size"), ready in $ready_ms ms, stopped in $stop_ms ms"
jq -n --arg image "$img" --argjson size "$size" --argjson readyMs "$ready_ms" --argjson stopMs "$stop_ms" \
  '{image: $image, sizeBytes: $size, readyMs: $readyMs, stopMs: $stopMs}' >"$out/summary.json"
