#!/usr/bin/env bash
# Builds every kustomization under config/ with kubectl's kustomize and checks what the product
# promises about its manifests. Offline: no cluster is needed (the e2e suite does the server-side
# dry-run against a real apiserver).
#
#   hack/manifests/validate.sh            (make validate-manifests)
#
# Built: config/default, every config/overlays/*, and the compositions a user would write: gke +
# config/prometheus, gke + config/certmanager/external-issuer with an issuer patch, gke +
# config/capacity-warnings, gke + config/network-policy, gke + config/vap/gke, and gke +
# config/policy-reports.
# Checked in each (jq over the built objects):
#   - the Deployment: restricted securityContext (runAsNonRoot, numeric 65532 user and group,
#     readOnlyRootFilesystem, allowPrivilegeEscalation false, drop ALL, seccomp RuntimeDefault),
#     no host namespaces, 2+ replicas, probes, a memory limit (with V8's old space at most two
#     thirds of it), the service account token
#   - RBAC: one ClusterRole granting exactly list/watch on servicecidrs and ipaddresses, bound
#     to the webhook's ServiceAccount; one Role granting get/update on the reservations Lease by
#     name and nothing else, bound to the same ServiceAccount; no other Role or binding (but
#     config/policy-reports' own ClusterRole and binding, checked with it)
#   - the shared reservations: the Lease exists in the webhook's namespace under the name the Role
#     grants, and the Deployment passes its namespace in POD_NAMESPACE (Downward API)
#   - the ValidatingWebhookConfiguration: failurePolicy Fail, sideEffects NoneOnDryRun, the two
#     matchConditions, AdmissionReview v1, no status subresource, pointing at the webhook Service
#   - the wiring: Service -> container port, cert-manager annotation -> Certificate -> Secret ->
#     Deployment volume, DNS names, every namespaced object in servicecidr-guard-system
#   - overlays: the policy ConfigMap is mounted and loads with the server's own policy parser;
#     gke and kind ship config/policies/gke-beta.yaml; kind uses servicecidr-guard:e2e, never pulled
#   - config/vap/gke: the ValidatingAdmissionPolicy and binding, Fail, Deny, the webhook's two skips
#   - config/policy-reports: the CronJob restricted as the Deployment, running `audit -o
#     policyreport --apply` on the same policy ConfigMap, as a ServiceAccount that may list
#     servicecidrs and ipaddresses and create/patch the one report, nothing more
# With promtool (PROMTOOL, or on PATH; make promtool builds it), the PrometheusRule is checked
# (promtool check rules) and unit-tested (config/prometheus/rules_test.yaml); REQUIRE_PROMTOOL=1
# (CI) makes a missing promtool a failure.
#
# Environment: KUBECTL (default: hack/control-plane/find-kubectl.sh), NODE (default: the repository's Node 24),
# OUT (keep the built manifests there).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
kubectl=$(hack/control-plane/find-kubectl.sh)
node=${NODE:-$repo/node_modules/.bin/node}
namespace=servicecidr-guard-system

log() { printf '[validate-manifests] %s\n' "$*" >&2; }
command -v jq >/dev/null || { log "jq is not installed (apt-get install jq)"; exit 1; }
[[ -x $node ]] || { log "no Node.js at $node (npm ci, or set NODE)"; exit 1; }
[[ $("$node" --version) == v24.* ]] || { log "$node is not Node.js 24 (needed to load src/config/policy.ts)"; exit 1; }
log "kubectl: $kubectl ($("$kubectl" version --client 2>/dev/null | tr '\n' ' '))"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${OUT:-$work/out}
mkdir -p "$out"

failures=0
fail() { log "FAIL [$1] $2"; failures=$((failures + 1)); }

# YAML stream -> JSON array, with the YAML library the server itself uses (js-yaml).
to_json() {
  "$node" --input-type=module -e '
    import { loadAll } from "js-yaml"
    import { readFileSync } from "node:fs"
    process.stdout.write(JSON.stringify(loadAll(readFileSync(0, "utf8")).filter((o) => o !== null)))
  '
}

# check NAME JQ_FILTER [jq args...]: the filter must print true for the built objects ($all).
check() {
  local name=$1 filter=$2
  shift 2
  local result
  result=$(jq -r "$@" "$filter" "$json" 2>&1) || true
  if [[ $result != true ]]; then fail "$target" "$name${result:+ (got: ${result//$'\n'/ })}"; fi
}

# A kustomization outside the repository that composes the given pieces, as a user's overlay would.
compose() {
  local dir=$work/compose-$1
  shift
  mkdir -p "$dir"
  local rel
  rel=$(realpath --relative-to="$dir" "$repo/config")
  printf '%s\n' "${@//@CONFIG@/$rel}" > "$dir/kustomization.yaml"
  echo "$dir"
}

targets=(default)
for dir in config/overlays/*/; do targets+=("overlays/$(basename "$dir")"); done
declare -A paths=([default]=config/default)
for t in "${targets[@]}"; do [[ $t == default ]] || paths[$t]=config/$t; done
paths[compose/gke+prometheus]=$(compose prometheus \
  'resources: [@CONFIG@/overlays/gke]' \
  'components: [@CONFIG@/prometheus]')
paths[compose/gke+external-issuer]=$(compose external-issuer \
  'resources: [@CONFIG@/overlays/gke]' \
  'components: [@CONFIG@/certmanager/external-issuer]' \
  'patches:' \
  '  - target: {group: cert-manager.io, kind: Certificate, name: servicecidr-guard-serving-cert}' \
  '    patch: |-' \
  '      - op: replace' \
  '        path: /spec/issuerRef' \
  '        value: {group: cert-manager.io, kind: ClusterIssuer, name: my-ca}')
paths[compose/gke+capacity-warnings]=$(compose capacity-warnings \
  'resources: [@CONFIG@/overlays/gke]' \
  'components: [@CONFIG@/capacity-warnings]')
paths[compose/gke+network-policy]=$(compose network-policy \
  'resources: [@CONFIG@/overlays/gke]' \
  'components: [@CONFIG@/network-policy]')
paths[compose/gke+vap]=$(compose vap \
  'resources: [@CONFIG@/overlays/gke]' \
  'components: [@CONFIG@/vap/gke]')
paths[compose/gke+policy-reports]=$(compose policy-reports \
  'resources: [@CONFIG@/overlays/gke]' \
  'components: [@CONFIG@/policy-reports]')
targets+=(compose/gke+prometheus compose/gke+external-issuer compose/gke+capacity-warnings compose/gke+network-policy compose/gke+vap compose/gke+policy-reports)

# Common jq definitions, applied to the array of built objects.
# shellcheck disable=SC2016 # jq variables, not shell ones
defs='
  def objs($kind): map(select(.kind == $kind));
  def one($kind): objs($kind) | if length == 1 then .[0] else error("expected one \($kind), found \(length)") end;
  def deploy: one("Deployment");
  def podspec: deploy.spec.template.spec;
  def vwc: one("ValidatingWebhookConfiguration");
  def named($kind; $name): objs($kind) | map(select(.metadata.name == $name)) | if length == 1 then .[0] else error("expected one \($kind) \($name), found \(length)") end;
'

for target in "${targets[@]}"; do
  path=${paths[$target]}
  file=$out/${target//\//_}.yaml
  if ! "$kubectl" kustomize "$path" > "$file" 2> "$work/err"; then
    fail "$target" "kustomize build failed: $(cat "$work/err")"
    continue
  fi
  json=$work/${target//\//_}.json
  if ! to_json < "$file" > "$json"; then fail "$target" "the build output is not valid YAML"; continue; fi
  log "$target: built $(jq length "$json") objects ($(jq -r '[.[].kind] | group_by(.) | map("\(length) \(.[0])") | join(", ")' "$json"))"

  # --- Deployment: restricted securityContext and availability ---
  check "Deployment servicecidr-guard in $namespace" "$defs deploy | .metadata.name == \"servicecidr-guard\" and .metadata.namespace == \"$namespace\""
  check "pod runs as non-root 65532:65532 with seccomp RuntimeDefault" "$defs podspec.securityContext |
    .runAsNonRoot == true and .runAsUser == 65532 and .runAsGroup == 65532 and .seccompProfile.type == \"RuntimeDefault\""
  check "every container: no privilege escalation, read-only root, drop ALL, non-root, seccomp" "$defs [podspec | (.containers + (.initContainers // []))[] | .securityContext |
    .allowPrivilegeEscalation == false and .readOnlyRootFilesystem == true and .capabilities.drop == [\"ALL\"]
    and ((.capabilities.add // []) | length == 0) and (.privileged // false) == false
    and .runAsNonRoot == true and .runAsUser == 65532 and .runAsGroup == 65532
    and .seccompProfile.type == \"RuntimeDefault\"] | length > 0 and all"
  check "no host network, PID, IPC or hostPath" "$defs podspec | (.hostNetwork // false) == false and (.hostPID // false) == false
    and (.hostIPC // false) == false and ([.volumes[]? | select(.hostPath)] | length == 0)"
  check "service account token mounted (the webhook reads the API)" "$defs podspec | .automountServiceAccountToken == true and .serviceAccountName == \"servicecidr-guard\""
  check "2+ replicas, PDB minAvailable 1 selecting the Pods" "$defs deploy.spec as \$spec | \$spec.replicas >= 2 and
    (one(\"PodDisruptionBudget\") | .spec.minAvailable == 1 and .spec.selector.matchLabels == \$spec.selector.matchLabels)"
  check "priorityClassName system-cluster-critical with its ResourceQuota" "$defs podspec.priorityClassName == \"system-cluster-critical\" and
    (one(\"ResourceQuota\") | .spec.scopeSelector.matchExpressions[0].values | index(\"system-cluster-critical\") != null)"
  check "liveness /livez, readiness /readyz, startup probe, all on the health port" "$defs podspec.containers[0] |
    .livenessProbe.httpGet.path == \"/livez\" and .readinessProbe.httpGet.path == \"/readyz\" and .startupProbe.httpGet.path == \"/livez\"
    and ([.livenessProbe, .readinessProbe, .startupProbe] | all(.httpGet.port == \"health\"))
    and (.ports | map(select(.name == \"health\"))[0].containerPort) == 8081"
  check "memory limit and requests set" "$defs podspec.containers[0].resources | .limits.memory != null and .requests.memory != null and .requests.cpu != null"
  # V8's old space must leave the young generation, code and buffers room below the limit, or the
  # process is OOM-killed instead of collecting garbage (config/manager/manager.yaml says why).
  check "NODE_OPTIONS --max-old-space-size at most two thirds of the memory limit (Mi)" "$defs podspec.containers[0] |
    (.resources.limits.memory | capture(\"^(?<n>[0-9]+)Mi$\").n | tonumber) as \$limit |
    ([.env[] | select(.name == \"NODE_OPTIONS\")][0].value | capture(\"--max-old-space-size=(?<m>[0-9]+)\").m | tonumber) as \$old |
    \$old * 3 <= \$limit * 2"
  # serve's own default --shutdown-delay is 5 s (src/cli/serve.ts) when the args do not set it.
  check "shutdown fits the grace period (preStop sleep + --shutdown-delay + --shutdown-timeout < terminationGracePeriodSeconds)" "$defs podspec |
    (.containers[0].args | index(\"--shutdown-timeout\") as \$i | .[\$i + 1] | tonumber) as \$drain |
    (.containers[0].args | (index(\"--shutdown-delay\") // null) as \$i | if \$i == null then 5 else (.[\$i + 1] | tonumber) end) as \$delay |
    (.containers[0].lifecycle.preStop.sleep.seconds // 0) + \$delay + \$drain < .terminationGracePeriodSeconds"
  check "topology spread over nodes (ScheduleAnyway) and preferred anti-affinity" "$defs podspec |
    ([.topologySpreadConstraints[] | select(.topologyKey == \"kubernetes.io/hostname\" and .whenUnsatisfiable == \"ScheduleAnyway\")] | length == 1)
    and (.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution | length > 0)
    and (.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution == null)"
  check "policy and TLS mounted read-only as whole directories (no subPath: updates reach the Pod)" "$defs podspec.containers[0].volumeMounts |
    (map(select(.mountPath == \"/etc/servicecidr-guard/policy\" or .mountPath == \"/etc/servicecidr-guard/tls\")) | length == 2)
    and all(.readOnly == true and .subPath == null)"

  # --- RBAC: read servicecidrs and ipaddresses, nothing more ---
  check "the webhook's ClusterRole: list/watch on servicecidrs and ipaddresses only" "$defs named(\"ClusterRole\"; \"servicecidr-guard\").rules |
    all(.apiGroups == [\"networking.k8s.io\"] and (.resources - [\"servicecidrs\", \"ipaddresses\"] | length == 0)
        and (.verbs - [\"list\", \"watch\"] | length == 0) and .resourceNames == null and .nonResourceURLs == null)
    and ([.[] | .resources[] as \$r | .verbs[] as \$v | \"\(\$r):\(\$v)\"] | unique) ==
        [\"ipaddresses:list\", \"ipaddresses:watch\", \"servicecidrs:list\", \"servicecidrs:watch\"]"
  check "exactly one Role: get and update on the Lease servicecidr-guard-reservations, nothing else" "$defs one(\"Role\") |
    .metadata.name == \"servicecidr-guard-reservations\" and .metadata.namespace == \"$namespace\"
    and .rules == [{apiGroups: [\"coordination.k8s.io\"], resources: [\"leases\"], resourceNames: [\"servicecidr-guard-reservations\"], verbs: [\"get\", \"update\"]}]"
  check "exactly one RoleBinding: that Role to ServiceAccount servicecidr-guard/$namespace" "$defs one(\"RoleBinding\") |
    .metadata.namespace == \"$namespace\"
    and .roleRef == {apiGroup: \"rbac.authorization.k8s.io\", kind: \"Role\", name: \"servicecidr-guard-reservations\"}
    and .subjects == [{kind: \"ServiceAccount\", name: \"servicecidr-guard\", namespace: \"$namespace\"}]"
  # --- the shared reservations Lease ---
  check "the reservations Lease is in $namespace, named as the Role grants, with no spec or annotations for apply to fight over" "$defs one(\"Lease\") |
    .metadata.name == \"servicecidr-guard-reservations\" and .metadata.namespace == \"$namespace\"
    and (.spec // {}) == {} and (.metadata.annotations // {}) == {}"
  # serve's --reservation-lease defaults to \$POD_NAMESPACE/servicecidr-guard-reservations (src/cli/serve.ts).
  check "the Deployment finds the Lease: POD_NAMESPACE from the Downward API, no --no-shared-reservation, no other --reservation-lease" "$defs podspec.containers[0] |
    ([.env[] | select(.name == \"POD_NAMESPACE\")] == [{name: \"POD_NAMESPACE\", valueFrom: {fieldRef: {fieldPath: \"metadata.namespace\"}}}])
    and (.args | index(\"--no-shared-reservation\") == null)
    and (.args | (index(\"--reservation-lease\") // null) as \$i | \$i == null or .[\$i + 1] == \"$namespace/servicecidr-guard-reservations\")"
  rbac_names='["servicecidr-guard"]'
  if [[ $target == compose/gke+policy-reports ]]; then rbac_names='["servicecidr-guard", "servicecidr-guard-audit"]'; fi
  check "no ClusterRole or ClusterRoleBinding but $rbac_names" "[.[] | select(.kind == \"ClusterRole\" or .kind == \"ClusterRoleBinding\") | .metadata.name] | unique == $rbac_names"
  check "ClusterRoleBinding: ClusterRole servicecidr-guard to ServiceAccount servicecidr-guard/$namespace" "$defs named(\"ClusterRoleBinding\"; \"servicecidr-guard\") |
    .roleRef == {apiGroup: \"rbac.authorization.k8s.io\", kind: \"ClusterRole\", name: \"servicecidr-guard\"}
    and .subjects == [{kind: \"ServiceAccount\", name: \"servicecidr-guard\", namespace: \"$namespace\"}]"

  # --- ValidatingWebhookConfiguration ---
  # (config/capacity-warnings adds a second, warning-only webhook; it is checked below.)
  # NoneOnDryRun: the webhook writes the reservations Lease, but never for a dry run.
  check "webhook: failurePolicy Fail, sideEffects NoneOnDryRun, AdmissionReview v1, short timeout" "$defs [vwc.webhooks[0]] | all(
    .failurePolicy == \"Fail\" and .sideEffects == \"NoneOnDryRun\" and .admissionReviewVersions == [\"v1\"]
    and .timeoutSeconds <= 10 and .matchPolicy == \"Equivalent\" and .name == \"validate.servicecidr-guard.dev\")"
  check "webhook rules: servicecidrs v1+v1beta1 CREATE/UPDATE/DELETE, cluster scope, no status subresource" "$defs vwc.webhooks[0].rules == [{
    apiGroups: [\"networking.k8s.io\"], apiVersions: [\"v1\", \"v1beta1\"], operations: [\"CREATE\", \"UPDATE\", \"DELETE\"],
    resources: [\"servicecidrs\"], scope: \"Cluster\"}]"
  check "webhook matchConditions: skip the apiserver's default ServiceCIDR and metadata-only updates" "$defs vwc.webhooks[0].matchConditions == [
    {name: \"skip-apiserver-default-servicecidr\", expression: \"!(request.userInfo.username == 'system:apiserver' && request.name == 'kubernetes')\"},
    {name: \"skip-metadata-only-updates\", expression: \"request.operation != 'UPDATE' || object.spec != oldObject.spec\"}]"
  check "webhook calls Service servicecidr-guard-webhook:443/validate, which targets the container's 9443" "$defs
    vwc.webhooks[0].clientConfig as \$cc | (\$cc.url == null) and \$cc.service == {namespace: \"$namespace\", name: \"servicecidr-guard-webhook\", path: \"/validate\", port: 443}
    and ([.[] | select(.kind == \"Service\" and .metadata.name == \$cc.service.name and .metadata.namespace == \$cc.service.namespace)][0] as \$svc |
      (\$svc.spec.ports | map(select(.port == 443))[0].targetPort) as \$tp |
      (podspec.containers[0].ports | map(select(.name == \$tp or .containerPort == \$tp))[0].containerPort) == 9443
      and (deploy.spec.template.metadata.labels as \$labels | \$svc.spec.selector | to_entries | all(\$labels[.key] == .value)))"

  # --- cert-manager wiring ---
  check "CA injected from a Certificate whose Secret the Pods mount and whose names match the Service" "$defs
    (vwc.metadata.annotations[\"cert-manager.io/inject-ca-from\"] | split(\"/\")) as [\$ns, \$name] |
    [.[] | select(.kind == \"Certificate\" and .metadata.namespace == \$ns and .metadata.name == \$name)][0] as \$cert |
    \$cert != null and \$name == \"servicecidr-guard-serving-cert\" and \$cert.spec.secretName == \"servicecidr-guard-tls\"
    and (podspec.volumes | map(select(.name == \"tls\"))[0].secret.secretName) == \$cert.spec.secretName
    and (\$cert.spec.dnsNames | index(\"servicecidr-guard-webhook.$namespace.svc\") != null)
    and (\$cert.spec.issuerRef.name as \$issuer | \$cert.spec.issuerRef.kind == \"ClusterIssuer\"
         or ([.[] | select(.kind == \"Issuer\" and .metadata.name == \$issuer and .metadata.namespace == \$ns)] | length == 1))"

  # --- every namespaced object in the namespace, and the namespace is restricted ---
  check "every namespaced object is in $namespace" "[.[] | select(.kind | IN(\"Namespace\", \"ClusterRole\", \"ClusterRoleBinding\", \"ValidatingWebhookConfiguration\", \"ValidatingAdmissionPolicy\", \"ValidatingAdmissionPolicyBinding\") | not)
    | select(.metadata.namespace != \"$namespace\") | \"\(.kind)/\(.metadata.name)\"] | if length == 0 then true else . end"
  check "Namespace $namespace enforces Pod Security restricted" "$defs one(\"Namespace\") |
    .metadata.name == \"$namespace\" and .metadata.labels[\"pod-security.kubernetes.io/enforce\"] == \"restricted\""

  # --- the policy ---
  policy_volume=$(jq -r "$defs podspec.volumes | map(select(.name == \"policy\"))[0].configMap.name" "$json")
  if [[ $target == default ]]; then
    # config/default carries no policy on purpose; the overlays add it.
    check "config/default has no policy ConfigMap" "$defs objs(\"ConfigMap\") | length == 0"
  else
    check "the Deployment mounts the generated policy ConfigMap (hash-suffixed, key policy.yaml)" "
      [.[] | select(.kind == \"ConfigMap\" and .metadata.name == \$cm and .metadata.namespace == \"$namespace\")] | length == 1
      and (\$cm | test(\"^servicecidr-guard-policy-[a-z0-9]+\$\"))
      and (.[] | select(.kind == \"ConfigMap\" and .metadata.name == \$cm) | .data | keys == [\"policy.yaml\"])" --arg cm "$policy_volume"
    policy_file=$work/policy-${target//[\/+]/_}.yaml
    jq -r --arg cm "$policy_volume" '.[] | select(.kind == "ConfigMap" and .metadata.name == $cm) | .data["policy.yaml"]' "$json" > "$policy_file"
    if ! problems=$("$node" --input-type=module -e '
        import { readFileSync } from "node:fs"
        import { parsePolicy } from "./src/config/policy.ts"
        try {
          parsePolicy(readFileSync(process.argv[1], "utf8"), "policy.yaml")
        } catch (error) {
          console.error(error instanceof Error ? error.message : String(error))
          process.exit(1)
        }
      ' "$policy_file" 2>&1); then
      fail "$target" "the shipped policy does not load: ${problems//$'\n'/ }"
    fi
  fi
  case $target in
    overlays/gke | overlays/kind | compose/*)
      jq -j --arg cm "$policy_volume" '.[] | select(.kind == "ConfigMap" and .metadata.name == $cm) | .data["policy.yaml"]' "$json" \
        | cmp -s - config/policies/gke-beta.yaml || fail "$target" "the shipped policy is not config/policies/gke-beta.yaml"
      ;;
    overlays/generic)
      jq -j --arg cm "$policy_volume" '.[] | select(.kind == "ConfigMap" and .metadata.name == $cm) | .data["policy.yaml"]' "$json" \
        | cmp -s - config/policies/generic.yaml || fail "$target" "the shipped policy is not config/policies/generic.yaml"
      ;;
  esac
  case $target in
    overlays/kind)
      check "kind: image servicecidr-guard:e2e, imagePullPolicy Never" "$defs podspec.containers[0] | .image == \"servicecidr-guard:e2e\" and .imagePullPolicy == \"Never\"" ;;
    *)
      check "image servicecidr-guard, pulled IfNotPresent" "$defs podspec.containers[0] | (.image | startswith(\"servicecidr-guard:\")) and .imagePullPolicy == \"IfNotPresent\"" ;;
  esac
  case $target in
    compose/gke+prometheus)
      check "ServiceMonitor scrapes the metrics Service, which selects the Pods" "$defs one(\"ServiceMonitor\") as \$sm |
        [.[] | select(.kind == \"Service\" and (.metadata.labels as \$l | \$sm.spec.selector.matchLabels | to_entries | all(\$l[.key] == .value)))] as \$svcs |
        (\$svcs | length == 1) and (\$svcs[0].spec.ports | map(.name) | index(\$sm.spec.endpoints[0].port) != null)
        and (\$svcs[0].spec.ports[0].targetPort == \"health\")"
      check "PrometheusRule alerts: range filling up, webhook down, cache not synced, policy reload failing, certificate expiring" "$defs
        [one(\"PrometheusRule\").spec.groups[].rules[] | .expr] | join(\" \") |
        contains(\"servicecidr_guard_servicecidr_addresses_in_use\") and contains(\"servicecidr_guard_servicecidr_usable_addresses\")
        and contains(\"servicecidr_guard_cache_synced == 0\") and contains(\"servicecidr_guard_policy_valid == 0\") and contains(\"servicecidr_guard_certificate_expiry_timestamp_seconds\")
        and contains(\"up{\")"
      promtool=${PROMTOOL:-$(command -v promtool || true)}
      if [[ -n $promtool ]]; then
        jq '.[] | select(.kind == "PrometheusRule") | .spec' "$json" > "$work/rules.json"
        if ! "$promtool" check rules "$work/rules.json" > "$work/promtool.out" 2>&1; then
          fail "$target" "promtool check rules: $(cat "$work/promtool.out")"
        else
          log "$target: promtool check rules: $(tr '\n' ' ' < "$work/promtool.out")"
        fi
        # config/prometheus/rules_test.yaml reads rules.json from its own directory.
        cp config/prometheus/rules_test.yaml "$work/rules_test.yaml"
        if ! (cd "$work" && "$promtool" test rules rules_test.yaml) > "$work/promtool.out" 2>&1; then
          fail "$target" "promtool test rules (config/prometheus/rules_test.yaml): $(cat "$work/promtool.out")"
        else
          log "$target: promtool test rules: $(tr '\n' ' ' < "$work/promtool.out")"
        fi
      elif [[ ${REQUIRE_PROMTOOL:-} == 1 ]]; then
        fail "$target" "promtool not found (make promtool, or set PROMTOOL) and REQUIRE_PROMTOOL=1: the PrometheusRule must be checked"
      else
        log "$target: promtool not found (make promtool, or set PROMTOOL): PrometheusRule not checked"
      fi
      ;;
    compose/gke+capacity-warnings)
      check "capacity webhook: Service CREATEs and UPDATEs, never blocks (Ignore), same endpoint, skips headless and UPDATEs that take no new address" "$defs
        one(\"ValidatingWebhookConfiguration\").webhooks as \$w | (\$w | length == 2) and (\$w[1] |
          .name == \"capacity.servicecidr-guard.dev\" and .failurePolicy == \"Ignore\" and .sideEffects == \"None\"
          and .rules == [{apiGroups: [\"\"], apiVersions: [\"v1\"], operations: [\"CREATE\", \"UPDATE\"], resources: [\"services\"], scope: \"Namespaced\"}]
          and .clientConfig == \$w[0].clientConfig and ([.matchConditions[].name] == [\"takes-a-cluster-ip\", \"takes-a-new-cluster-ip\"]))"
      ;;
    compose/gke+network-policy)
      check "NetworkPolicy: selects the webhook Pods, ingress only; the webhook port from the Konnectivity agents only, the health port from opted-in namespaces" "$defs
        one(\"NetworkPolicy\") as \$np | (\$np.metadata.namespace == \"$namespace\")
        and (\$np.spec.podSelector.matchLabels == deploy.spec.selector.matchLabels) and \$np.spec.policyTypes == [\"Ingress\"]
        and (\$np.spec.ingress | length == 2)
        and (\$np.spec.ingress[0] == {ports: [{port: \"webhook\", protocol: \"TCP\"}], from: [{
          namespaceSelector: {matchLabels: {\"kubernetes.io/metadata.name\": \"kube-system\"}},
          podSelector: {matchLabels: {\"k8s-app\": \"konnectivity-agent\"}}}]})
        and (\$np.spec.ingress[1] == {ports: [{port: \"health\", protocol: \"TCP\"}], from: [{
          namespaceSelector: {matchLabels: {\"servicecidr-guard.dev/scrape-metrics\": \"true\"}}}]})
        and ([podspec.containers[0].ports[].name] | index(\"webhook\") != null and index(\"health\") != null)"
      ;;
    compose/gke+vap)
      check "ValidatingAdmissionPolicy servicecidr-guard: Fail, servicecidrs v1+v1beta1 (Equivalent), the webhook's two skips, one 403 validation" "$defs
        one(\"ValidatingAdmissionPolicy\").spec as \$p | \$p.failurePolicy == \"Fail\" and \$p.matchConstraints.matchPolicy == \"Equivalent\"
        and \$p.matchConstraints.resourceRules[0].resources == [\"servicecidrs\"] and \$p.matchConstraints.resourceRules[0].apiVersions == [\"v1\", \"v1beta1\"]
        and (\$p.matchConditions[0:2] == vwc.webhooks[0].matchConditions)
        and (\$p.validations | length == 1 and .[0].reason == \"Forbidden\")"
      check "ValidatingAdmissionPolicyBinding: the policy, Deny (the policy's enforcement)" "$defs
        one(\"ValidatingAdmissionPolicyBinding\").spec == {policyName: one(\"ValidatingAdmissionPolicy\").metadata.name, validationActions: [\"Deny\"]}"
      ;;
    compose/gke+policy-reports)
      check "CronJob: restricted Pod and container, as the Deployment's" "$defs one(\"CronJob\").spec.jobTemplate.spec.template.spec as \$pod |
        \$pod.securityContext.runAsNonRoot == true and \$pod.securityContext.runAsUser == 65532 and \$pod.securityContext.seccompProfile.type == \"RuntimeDefault\"
        and (\$pod.containers | length == 1) and (\$pod.containers[0].securityContext |
          .allowPrivilegeEscalation == false and .readOnlyRootFilesystem == true and .capabilities.drop == [\"ALL\"] and .runAsNonRoot == true)
        and (\$pod.hostNetwork // false) == false and (\$pod.containers[0].resources.limits.memory != null)"
      check "CronJob: audit -o policyreport --apply with the webhook's policy ConfigMap, one run at a time" "$defs one(\"CronJob\") as \$cj |
        \$cj.spec.concurrencyPolicy == \"Forbid\" and \$cj.spec.jobTemplate.spec.template.spec as \$pod |
        (\$pod.containers[0].args | .[0] == \"audit\" and index(\"--apply\") != null and (index(\"-o\") as \$i | .[\$i + 1] == \"policyreport\"))
        and (\$pod.volumes | map(select(.name == \"policy\"))[0].configMap.name) == (podspec.volumes | map(select(.name == \"policy\"))[0].configMap.name)
        and \$pod.serviceAccountName == \"servicecidr-guard-audit\" and \$pod.automountServiceAccountToken == true
        and (\$pod.containers[0].image | startswith(\"servicecidr-guard:\"))"
      check "the audit's ClusterRole: list servicecidrs and ipaddresses; create and patch the one report; nothing else" "$defs
        named(\"ClusterRole\"; \"servicecidr-guard-audit\").rules == [
          {apiGroups: [\"networking.k8s.io\"], resources: [\"servicecidrs\", \"ipaddresses\"], verbs: [\"list\"]},
          {apiGroups: [\"wgpolicyk8s.io\"], resources: [\"clusterpolicyreports\"], resourceNames: [\"servicecidr-guard\"], verbs: [\"create\", \"patch\"]}]
        and (named(\"ClusterRoleBinding\"; \"servicecidr-guard-audit\") | .roleRef.name == \"servicecidr-guard-audit\"
          and .subjects == [{kind: \"ServiceAccount\", name: \"servicecidr-guard-audit\", namespace: \"$namespace\"}])
        and named(\"ServiceAccount\"; \"servicecidr-guard-audit\").metadata.namespace == \"$namespace\""
      ;;
    compose/gke+external-issuer)
      check "external issuer: serving certificate from ClusterIssuer my-ca, no bootstrap CA objects left" "$defs
        (one(\"Certificate\").spec.issuerRef == {group: \"cert-manager.io\", kind: \"ClusterIssuer\", name: \"my-ca\"}) and (objs(\"Issuer\") | length == 0)"
      ;;
  esac
  [[ $target == compose/gke+capacity-warnings ]] || check "exactly one webhook: the ServiceCIDR one" "$defs vwc.webhooks | length == 1"
done

if [[ -n ${OUT:-} ]]; then log "built manifests kept in $out"; fi
if (( failures > 0 )); then
  log "$failures check(s) failed"
  exit 1
fi
log "all ${#targets[@]} kustomizations build and pass"
