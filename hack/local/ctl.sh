#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Stops, starts or restarts components of the local control plane with the exact command line
# hack/local/up.sh used (recorded in $LOCAL_DIR/cmd/). For fault tests: restart kube-apiserver, take
# the webhook away and bring it back.
#
#   hack/local/ctl.sh stop|start|restart etcd|apiserver|controller-manager|webhook|webhook-N|webhook-proxy
#   hack/local/ctl.sh status [COMPONENT]
#
# "webhook" acts on every replica (webhook-1, webhook-2, ...); the round-robin proxy in front of
# them is its own component (webhook-proxy) and stays up, so kube-apiserver still connects and the
# call fails, as with a Service that has no ready endpoint.
# start and restart return once each component is usable again (the same checks as local-up).
# stop returns once each process has exited (SIGTERM to all at once, SIGKILL after STOP_GRACE_SECONDS,
# default 20).
set -euo pipefail

log_prefix=local-ctl
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

usage() {
  sed -n 's/^#   //p' "$0" >&2
  exit 2
}

action=${1:-}
[[ $action =~ ^(stop|start|restart|status)$ ]] || usage
load_env

status() {
  local c=$1 pid
  if pid=$(component_pid "$c"); then
    echo "$c running pid $pid"
  elif [[ -f $LOCAL_DIR/cmd/$c ]]; then
    echo "$c stopped"
  else
    echo "$c not configured"
  fi
}

if [[ $action == status ]]; then
  if [[ -n ${2:-} ]]; then
    mapfile -t chosen < <(component_names "$2")
    ((${#chosen[@]} > 0)) || exit 1
    for c in "${chosen[@]}"; do status "$c"; done
  else
    for c in "${components[@]}"; do status "$c"; done
  fi
  exit 0
fi

[[ -n ${2:-} ]] || usage
mapfile -t chosen < <(component_names "$2")
((${#chosen[@]} > 0)) || exit 1
for c in "${chosen[@]}"; do
  [[ -f $LOCAL_DIR/cmd/$c ]] || die "$c was not started by local-up (WEBHOOK=0?), so there is no command line to reuse"
done

start() {
  local c=$1 var pid
  if component_pid "$c" >/dev/null; then
    log "$c is already running"
    return
  fi
  log "starting $c"
  start_component "$c"
  wait_ready "$c"
  # Record the new PID where people and the e2e suite look for it.
  var=$(tr a-z- A-Z_ <<<"$c")_PID
  read -r pid _ <"$LOCAL_DIR/pids/$c"
  sed -i "s/^$var=.*/$var=$pid/" "$LOCAL_DIR/env"
  log "$c ready (pid $pid)"
}

# Replicas stop together, as a Deployment's Pods do when it is scaled to zero: one after the other,
# each draining for its --shutdown-delay, would keep the webhook half up for seconds longer.
stop_all() {
  local c pids=() failed=0
  for c in "${chosen[@]}"; do
    stop_component "$c" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return "$failed"
}

case $action in
  stop) stop_all ;;
  start) for c in "${chosen[@]}"; do start "$c"; done ;;
  restart)
    stop_all
    for c in "${chosen[@]}"; do start "$c"; done
    ;;
esac
