#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Runs the e2e suite on a fresh local control plane: hack/local/up.sh, `npm run test:e2e` with
# E2E_TARGET=local, then hack/local/down.sh, which runs whatever happened before (trap). Prints how
# long each phase took.
#
#   hack/local/e2e.sh                                        Kubernetes $DEFAULT_KUBE_VERSION
#   KUBE_VERSION=v1.34.4 E2E_REQUIRE=v1beta1 hack/local/e2e.sh   the v1beta1 API too, and fail without it
#   SHARED_RESERVATION=0 hack/local/e2e.sh                   replicas that do not share reservations:
#                                                            09-replicas then expects double admits
#
# Variables (all optional):
#   KUBE_VERSION   passed to local-up (default: DEFAULT_KUBE_VERSION in hack/versions.env)
#   POLICY         the baseline policy (default config/policies/gke-beta.yaml; the specs expect its
#                  rules). The webhook is started with a copy in a temporary directory, because the
#                  suite rewrites the policy in force (Warn, AllowExpansion) and must never edit a
#                  file of the repository; E2E_POLICY tells the suite the original to restore.
#   E2E_REQUIRE    comma-separated items the run must cover (v1beta1), else it fails
#   E2E_SUMMARY    where the summary JSON goes (default .e2e/summary.json)
#   E2E_SPECS      only these spec files (e.g. 09-replicas), then the summary; default: all of them
#   LOCAL_DIR, SERVICE_CIDR, WEBHOOK, WEBHOOK_REPLICAS, SHARED_RESERVATION, ports: as for
#                  hack/local/up.sh; KEEP_STATE=1 keeps $LOCAL_DIR afterwards
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
log() { printf '[e2e-local] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

local_dir=${LOCAL_DIR:-$repo/.local}
if compgen -G "$local_dir/pids/*" >/dev/null; then
  die "a local control plane is already running ($local_dir): this script starts and stops its own. Stop it with hack/local/down.sh, or run the suite against it with: npm run test:e2e"
fi

policy=${POLICY:-$repo/config/policies/gke-beta.yaml}
[[ -f $policy ]] || die "policy file $policy not found"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/servicecidr-guard-e2e.XXXXXX")
cp "$policy" "$scratch/policy.yaml"

now() { date +%s.%N; }
elapsed() { awk -v t0="$1" -v t1="$2" 'BEGIN { printf "%.1f", t1 - t0 }'; }
phases=()
t_start=$(now)
suite_status=not-run

# shellcheck disable=SC2317 # run by the EXIT trap
finish() {
  local status=$? t
  t=$(now)
  log "local-down"
  if ! "$here/down.sh"; then
    log "local-down failed; see the processes listed in $local_dir/pids"
    status=1
  fi
  phases+=("local-down $(elapsed "$t" "$(now)") s")
  rm -rf "$scratch"
  log "phases: ${phases[*]}; total $(elapsed "$t_start" "$(now)") s; suite: $suite_status"
  exit "$status"
}
trap finish EXIT

t=$(now)
log "local-up (KUBE_VERSION=${KUBE_VERSION:-default}, WEBHOOK=${WEBHOOK:-process}, WEBHOOK_REPLICAS=${WEBHOOK_REPLICAS:-2}, SHARED_RESERVATION=${SHARED_RESERVATION:-1}, policy: copy of $policy)"
POLICY=$scratch/policy.yaml "$here/up.sh"
phases+=("local-up $(elapsed "$t" "$(now)") s")

t=$(now)
log "npm run test:e2e (E2E_TARGET=local${E2E_REQUIRE:+, E2E_REQUIRE=$E2E_REQUIRE}${E2E_SPECS:+, E2E_SPECS=$E2E_SPECS})"
set +e
E2E_TARGET=local E2E_POLICY=$policy LOCAL_DIR=$local_dir E2E_SPECS=${E2E_SPECS:-} npm run test:e2e
suite_rc=$?
set -e
phases+=("suite $(elapsed "$t" "$(now)") s")
if ((suite_rc == 0)); then suite_status=passed; else suite_status="failed (exit $suite_rc)"; fi
exit "$suite_rc"
