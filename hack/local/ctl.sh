#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Stops, starts or restarts one component of the local control plane with the exact command line
# hack/local/up.sh used (recorded in $LOCAL_DIR/cmd/). For fault tests: restart kube-apiserver, take
# the webhook away and bring it back.
#
#   hack/local/ctl.sh stop|start|restart etcd|apiserver|controller-manager|webhook
#   hack/local/ctl.sh status [COMPONENT]
#
# start and restart return once the component is usable again (the same checks as local-up).
# stop returns once the process has exited (SIGTERM, SIGKILL after STOP_GRACE_SECONDS, default 20).
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
    status "$(component_name "$2")"
  else
    for c in "${components[@]}"; do status "$c"; done
  fi
  exit 0
fi

[[ -n ${2:-} ]] || usage
c=$(component_name "$2")
[[ -f $LOCAL_DIR/cmd/$c ]] || die "$c was not started by local-up (WEBHOOK=0?), so there is no command line to reuse"

start() {
  if component_pid "$c" >/dev/null; then
    log "$c is already running"
    return
  fi
  log "starting $c"
  start_component "$c"
  wait_ready "$c"
  # Record the new PID where people and the e2e suite look for it.
  local var pid
  var=$(tr a-z- A-Z_ <<<"$c")_PID
  read -r pid _ <"$LOCAL_DIR/pids/$c"
  sed -i "s/^$var=.*/$var=$pid/" "$LOCAL_DIR/env"
  log "$c ready (pid $pid)"
}

case $action in
  stop) stop_component "$c" ;;
  start) start ;;
  restart)
    stop_component "$c"
    start
    ;;
esac
