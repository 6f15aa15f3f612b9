#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Stops what hack/local/up.sh started, and only that: each PID recorded in $LOCAL_DIR/pids is signalled
# only while it is still the same process (same start time, same executable). Then removes $LOCAL_DIR.
#
#   hack/local/down.sh                 stop and remove the state
#   KEEP_STATE=1 hack/local/down.sh    stop, keep $LOCAL_DIR (logs, certificates, etcd data)
set -euo pipefail

log_prefix=local-down
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

if [[ ! -d $LOCAL_DIR ]]; then
  log "nothing to stop: $LOCAL_DIR does not exist"
  exit 0
fi
[[ -f $marker ]] || die "$LOCAL_DIR was not made by local-up (no $(basename "$marker")); not touching it"

for ((i = ${#components[@]} - 1; i >= 0; i--)); do
  stop_component "${components[i]}"
done

if [[ ${KEEP_STATE:-0} == 1 ]]; then
  log "stopped; state kept in $LOCAL_DIR"
else
  rm -rf "$LOCAL_DIR"
  log "stopped; removed $LOCAL_DIR"
fi
