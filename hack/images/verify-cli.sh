#!/usr/bin/env bash
# Proves that the image runs every command line subcommand as a team uses it in CI, files mounted
# (make image-verify-cli):
#
#   hack/images/verify-cli.sh                   docker run --rm -i -v DIR:/work:ro -w /work IMG ARGS...
#                                               IMG: the image `make image` builds,
#                                               servicecidr-guard:<package.json version>
#   hack/images/verify-cli.sh --main DIST_MAIN  the same commands as NODE DIST_MAIN ARGS... in DIR,
#                                               without a container engine (dist/main.js after
#                                               npm run build)
#
# In a scratch directory DIR (world-readable: the image runs as user 65532) it writes a policy, two
# manifests and a cluster dump, then checks, for each subcommand: exit code, the line a user reads,
# and that errors are one line without a stack trace:
#   --version; check (admitted 0, denied 1, from standard input, JUnit); audit --cluster (-o json,
#   -o policyreport); plan; generate vap; a broken policy (exit 2).
#
# Needs: bash, and a Docker engine with the image (make image; CONTAINER_TOOL=podman works too), or
# for --main NODE (default: the repository's node_modules/.bin/node, Node 24).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
log() { printf '[image-verify-cli] %s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$repo/package.json")
case ${1:-} in
  '')
    mode=--image
    target=${IMG:-servicecidr-guard:$version}
    "${CONTAINER_TOOL:-docker}" image inspect "$target" >/dev/null 2>&1 || die "image $target not found: run make image"
    ;;
  --main)
    mode=--main
    target=${2:-}
    [[ -f $target ]] || die "${target:-DIST_MAIN} not found (npm run build)"
    target=$(realpath "$target")
    ;;
  *) die "usage: $0 (IMG=IMAGE in the environment) | $0 --main PATH/TO/dist/main.js" ;;
esac

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 0755 "$dir"
cat >"$dir/policy.yaml" <<'YAML'
apiVersion: servicecidr-guard/v1alpha1
kind: Policy
spec:
  allowedRanges: [34.118.224.0/20]
  overlap: Deny
  prefixLength: {ipv4: {min: 20, max: 28}}
YAML
cat >"$dir/inside.yaml" <<'YAML'
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: inside}
spec: {cidrs: [34.118.229.0/24]}
YAML
cat >"$dir/outside.yaml" <<'YAML'
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: outside}
spec: {cidrs: [10.100.0.0/24]}
YAML
cat >"$dir/cluster.yaml" <<'YAML'
apiVersion: v1
kind: List
items:
- apiVersion: networking.k8s.io/v1
  kind: ServiceCIDR
  metadata: {name: kubernetes}
  spec: {cidrs: [34.118.224.0/22]}
- apiVersion: networking.k8s.io/v1
  kind: ServiceCIDR
  metadata: {name: legacy}
  spec: {cidrs: [10.100.0.0/24]}
YAML
printf 'apiVersion: servicecidr-guard/v1alpha1\nkind: Policy\nspec: {overlap: sometimes}\n' >"$dir/broken.yaml"
chmod 0644 "$dir"/*

# cli [--stdin FILE] ARGS...: runs the command line in DIR; sets $code, $out and $err.
cli() {
  local stdin=/dev/null
  if [[ $1 == --stdin ]]; then stdin=$dir/$2; shift 2; fi
  set +e
  if [[ $mode == --image ]]; then
    "${CONTAINER_TOOL:-docker}" run --rm -i -v "$dir:/work:ro" -w /work "$target" "$@" <"$stdin" >"$dir.out" 2>"$dir.err"
  else
    (cd "$dir" && "${NODE:-$repo/node_modules/.bin/node}" "$target" "$@" <"$stdin" >"$dir.out" 2>"$dir.err")
  fi
  code=$?
  set -e
  out=$(cat "$dir.out")
  err=$(cat "$dir.err")
  rm -f "$dir.out" "$dir.err"
}

checks=0
# expect NAME CODE PATTERN: the last command exited CODE and its stdout matches PATTERN (grep -E).
expect() {
  local name=$1 want=$2 pattern=$3
  [[ $code == "$want" ]] || die "$name: exit $code, expected $want (stderr: $err)"
  grep -Eq -- "$pattern" <<<"$out" || die "$name: stdout does not match /$pattern/: $out"
  checks=$((checks + 1))
  log "ok: $name"
}

cli --version
expect "--version" 0 "^$version\$"
cli check --policy policy.yaml inside.yaml
expect "check: admitted, exit 0" 0 '^ADMITTED CREATE ServiceCIDR "inside" 34\.118\.229\.0/24 \(inside\.yaml, document 1\)$'
cli check --policy policy.yaml outside.yaml
expect "check: denied, exit 1" 1 'AllowedRanges: spec\.cidrs\[0\] 10\.100\.0\.0/24 is outside the allowed IPv4 ranges \(34\.118\.224\.0/20\)'
cli --stdin outside.yaml check --policy policy.yaml -
expect "check: a manifest on standard input" 1 '^DENIED CREATE ServiceCIDR "outside" 10\.100\.0\.0/24 \(\(stdin\), document 1\)$'
cli check --policy policy.yaml -o junit inside.yaml outside.yaml
expect "check -o junit" 1 '<testsuites name="servicecidr-guard check" tests="2" failures="1"'
cli audit --policy policy.yaml --cluster cluster.yaml -o json
expect "audit --cluster -o json" 1 '"summary": \{ *$|"denied": 1'
cli audit --policy policy.yaml --cluster cluster.yaml -o policyreport
expect "audit -o policyreport" 1 '^kind: ClusterPolicyReport$'
cli plan --policy policy.yaml --cluster cluster.yaml --size 200
expect "plan" 0 '^34\.118\.22[0-9]\.0/24: 254 usable Service addresses \(IPv4\)$'
cli generate vap --policy policy.yaml
expect "generate vap" 0 '^kind: ValidatingAdmissionPolicy$'
cli check --policy broken.yaml inside.yaml
expect "a broken policy: exit 2" 2 '^$'
grep -q '^servicecidr-guard: invalid policy broken.yaml:$' <<<"$err" || die "a broken policy: stderr does not name the file: $err"
! grep -q '    at ' <<<"$err" || die "a broken policy: a stack trace on stderr: $err"

log "all $checks checks passed ($mode $target)"
