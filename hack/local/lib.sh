# shellcheck shell=bash
# Shared by hack/local/up.sh, hack/local/down.sh and hack/local/ctl.sh: where the local control plane
# keeps its state, and how a component is started, recognised and stopped. Sourced, not executed.
#
# State layout under $LOCAL_DIR (default .local/ in the repository):
#   .servicecidr-guard-local  marker: only a directory holding it is ever wiped
#   env                       KEY=value lines for people and the e2e suite (KUBECONFIG, ports, ...)
#   kubeconfig                admin (O=system:masters) kubeconfig
#   webhook.kubeconfig        the webhook's: its ServiceAccount's identity, so it has exactly the
#                             permissions config/rbac grants in a cluster
#   pki/                      certificates and keys
#   etcd/                     etcd data
#   cmd/COMPONENT             the exact argv of each component, NUL-separated, so a restart reuses it
#   pids/COMPONENT            "PID STARTTIME" of each process we started
#   containers/COMPONENT      the container a component runs in (WEBHOOK=image), if any
#   logs/COMPONENT.log        stdout and stderr of each component
#   logs/audit.log            kube-apiserver's audit log of ServiceCIDR requests (hack/audit-policy.yaml)

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCAL_DIR=${LOCAL_DIR:-$repo_root/.local}
[[ $LOCAL_DIR == /* ]] || LOCAL_DIR=$PWD/$LOCAL_DIR
# shellcheck disable=SC2034 # marker and components are read by the scripts that source this file
marker=$LOCAL_DIR/.servicecidr-guard-local

# The components local-up recorded, in start order (stop goes the other way): the control plane,
# each webhook replica (webhook-1, webhook-2, ...), and the round-robin proxy in front of the
# replicas when there are several (webhook-proxy).
list_components() {
  local cmd
  printf '%s\n' etcd kube-apiserver kube-controller-manager
  for cmd in "$LOCAL_DIR"/cmd/webhook-[0-9]*; do
    if [[ -e $cmd ]]; then basename "$cmd"; fi
  done | sort -t- -k2 -n
  if [[ -e $LOCAL_DIR/cmd/webhook-proxy ]]; then echo webhook-proxy; fi
}

# Sets the array `components` from what is recorded now.
load_components() {
  # shellcheck disable=SC2034 # read by the scripts that source this file
  mapfile -t components < <(list_components)
}
load_components

log() { printf '[%s] %s\n' "${log_prefix:-local}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The components a name stands for, one a line; accepts the short names the e2e suite uses.
# "webhook" is every replica (not the proxy, a component of its own); webhook-N is one replica.
component_names() {
  local c found=0
  case $1 in
    etcd) echo etcd ;;
    apiserver | kube-apiserver) echo kube-apiserver ;;
    controller-manager | kube-controller-manager | kcm) echo kube-controller-manager ;;
    webhook | servicecidr-guard)
      for c in "${components[@]}"; do
        if [[ $c =~ ^webhook-[0-9]+$ ]]; then echo "$c"; found=1; fi
      done
      ((found == 1)) || die "no webhook replica was started by local-up (WEBHOOK=0?)"
      ;;
    webhook-[0-9]* | proxy | webhook-proxy)
      c=$1
      [[ $c == proxy ]] && c=webhook-proxy
      [[ " ${components[*]} " == *" $c "* ]] || die "$c was not started by local-up (components: ${components[*]})"
      echo "$c"
      ;;
    *) die "unknown component '$1' (etcd, apiserver, controller-manager, webhook, webhook-N, webhook-proxy)" ;;
  esac
}

# Field 22 of /proc/PID/stat: start time in clock ticks since boot. Together with the PID it names one
# process; a recycled PID has a different start time. The command name (field 2) may hold spaces, so
# count fields after its closing parenthesis.
proc_starttime() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  awk '{ print $20 }' <<<"$stat"
}

# Prints the PID of COMPONENT if the process we recorded is still that process: same PID, same start
# time and the same executable as the recorded command line. Returns 1 otherwise.
component_pid() {
  local c=$1 pid start exe argv0
  [[ -f $LOCAL_DIR/pids/$c ]] || return 1
  read -r pid start <"$LOCAL_DIR/pids/$c" || return 1
  [[ $(proc_starttime "$pid") == "$start" ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  argv0=$(head -z -n1 "$LOCAL_DIR/cmd/$c" | tr -d '\0')
  [[ $exe == "$(readlink -f "$argv0")" ]] || return 1
  echo "$pid"
}

# Records the argv of COMPONENT; start_component runs exactly this.
save_command() {
  local c=$1
  shift
  mkdir -p "$LOCAL_DIR/cmd"
  printf '%s\0' "$@" >"$LOCAL_DIR/cmd/$c"
}

# Starts COMPONENT from its recorded argv, detached from our session (setsid) so that closing the
# terminal or a Ctrl-C in the caller does not take it down, and records its PID and start time.
start_component() {
  local c=$1 pid args=()
  mapfile -d '' args <"$LOCAL_DIR/cmd/$c"
  mkdir -p "$LOCAL_DIR/pids" "$LOCAL_DIR/logs"
  printf '\n==== %s starting %s\n' "$(date -u +%FT%TZ)" "$c" >>"$LOCAL_DIR/logs/$c.log"
  # A non-interactive shell does not make background jobs process-group leaders, so setsid(1) calls
  # setsid(2) and execs in place: $! is the component itself, not a setsid wrapper.
  (cd "$repo_root" && exec setsid "${args[@]}" </dev/null >>"$LOCAL_DIR/logs/$c.log" 2>&1) &
  pid=$!
  local start=''
  for _ in $(seq 50); do
    start=$(proc_starttime "$pid") && [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$(readlink -f "${args[0]}")" ]] && break
    start=''
    sleep 0.02
  done
  [[ -n $start ]] || { log "$c exited at once"; tail_log "$c"; return 1; }
  echo "$pid $start" >"$LOCAL_DIR/pids/$c"
}

# Removes the container COMPONENT ran in, if it is left: `docker run` passes SIGTERM on and removes
# the container (--rm) when it exits, but a `docker run` killed with SIGKILL leaves it running.
remove_container() {
  local name
  [[ -f $LOCAL_DIR/containers/$1 ]] || return 0
  name=$(cat "$LOCAL_DIR/containers/$1")
  if docker container inspect "$name" >/dev/null 2>&1; then
    log "removing container $name"
    docker rm -f "$name" >/dev/null
  fi
}

# Stops COMPONENT if it is the process we started: SIGTERM, then SIGKILL after a grace period.
stop_component() {
  local c=$1 pid grace=${STOP_GRACE_SECONDS:-20}
  if ! pid=$(component_pid "$c"); then
    if [[ -f $LOCAL_DIR/pids/$c ]]; then
      read -r pid _ <"$LOCAL_DIR/pids/$c"
      log "pid $pid is no longer our $c (it exited, or the PID was reused); leaving it alone"
      rm -f "$LOCAL_DIR/pids/$c"
    fi
    remove_container "$c"
    return 0
  fi
  log "stopping $c (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq $((grace * 10))); do
    component_pid "$c" >/dev/null || break
    sleep 0.1
  done
  if component_pid "$c" >/dev/null; then
    log "$c did not stop within ${grace}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while component_pid "$c" >/dev/null; do sleep 0.1; done
  fi
  remove_container "$c"
  rm -f "$LOCAL_DIR/pids/$c"
}

tail_log() {
  local f=$LOCAL_DIR/logs/$1.log
  [[ -f $f ]] || return 0
  log "last lines of $f:"
  tail -n "${LOG_TAIL_LINES:-40}" "$f" | sed 's/^/    /' >&2
}

# Loads the values local-up wrote (ports, paths, binaries) into the current shell.
load_env() {
  [[ -f $LOCAL_DIR/env ]] || die "$LOCAL_DIR/env not found: is the local control plane up? (hack/local/up.sh)"
  # shellcheck disable=SC1091
  source "$LOCAL_DIR/env"
}

# Polls until "$@" succeeds, while checking that COMPONENT is still alive, for at most TIMEOUT seconds.
wait_until() {
  local c=$1 timeout=$2 what=$3
  shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! component_pid "$c" >/dev/null; then
      log "$c exited while waiting for $what"
      tail_log "$c"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "$c: $what not reached after ${timeout}s"
      tail_log "$c"
      return 1
    fi
    sleep 0.2
  done
}

# The checks compare captured output rather than piping into grep -q: under pipefail, grep exiting at
# the first match can fail the pipeline with the writer's SIGPIPE.
etcd_healthy() { [[ $(curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health") == *'"health":"true"'* ]]; }

apiserver_ready() {
  [[ $(curl -fsS --cacert "$LOCAL_DIR/pki/ca.crt" --cert "$LOCAL_DIR/pki/admin.crt" --key "$LOCAL_DIR/pki/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT/readyz") == ok ]]
}

# webhook_ready N: replica N's /readyz answers 200 (its cache synced, its certificate loaded).
webhook_ready() {
  local ports
  IFS=, read -ra ports <<<"$WEBHOOK_HEALTH_PORTS"
  curl -fsS "http://127.0.0.1:${ports[$1 - 1]}/readyz"
}

# The proxy passes a TLS connection through to a replica: the webhook's /livez over HTTPS.
proxy_ready() { curl -fsS --cacert "$LOCAL_DIR/pki/webhook-ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/livez"; }

# Prints the log of COMPONENT since its latest start.
last_log_section() { awk '/^==== .* starting /{ buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' "$LOCAL_DIR/logs/$1.log"; }

# kube-controller-manager has no health endpoint with --secure-port=0. It runs only the
# service-cidr-controller, whose informers are the only ones to report a sync.
controller_manager_synced() { [[ $(last_log_section kube-controller-manager) == *'Caches are synced'* ]]; }

# The service-cidr-controller in kube-controller-manager is working once it has put its finalizer on the
# default ServiceCIDR (pkg/controller/servicecidrs: every ServiceCIDR gets it by a patch).
controller_manager_working() {
  [[ $("$KUBECTL" --kubeconfig "$LOCAL_DIR/kubeconfig" get servicecidr kubernetes -o jsonpath='{.metadata.finalizers}') == \
    *networking.k8s.io/service-cidr-finalizer* ]]
}

# Waits for COMPONENT to be usable; the check per component is the one above.
wait_ready() {
  case $1 in
    etcd) wait_until etcd 30 "health" etcd_healthy ;;
    kube-apiserver) wait_until kube-apiserver "${APISERVER_READY_TIMEOUT:-90}" "/readyz" apiserver_ready ;;
    kube-controller-manager) wait_until kube-controller-manager 60 "informer sync" controller_manager_synced ;;
    webhook-proxy) wait_until webhook-proxy 30 "a TLS connection through it" proxy_ready ;;
    webhook-*) wait_until "$1" 60 "/readyz" webhook_ready "${1#webhook-}" ;;
  esac
}
