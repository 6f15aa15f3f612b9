#!/usr/bin/env bash
# A Docker engine for `make image`, `make image-verify` and kind, set up by the project itself.
#
#   hack/containers/engine.sh up       make sure an engine answers: install Debian's docker.io if
#                                      dockerd is missing, start dockerd if none answers, with a runc
#                                      shim only where this machine's capabilities need one
#   hack/containers/engine.sh down     stop the dockerd that `up` started (never any other)
#   hack/containers/engine.sh status   say what answers, who started it, and whether it has the shim
#
# Idempotent. A machine whose engine already answers (`docker info`: a developer laptop, Docker
# Desktop, a CI runner with its own daemon) is left alone: nothing installed, started or changed.
#
# Needs: for `up` on a machine without an engine, a Debian-like system (apt-get) and root or sudo;
# jq (the shim edits OCI JSON with it); capsh (libcap2-bin) to name missing capabilities.
#
# Why a shim: `docker run --privileged` asks runc for every capability the kernel knows. Where this
# process's own capability bounding set lacks some (these machines run inside a container without
# CAP_SYS_RESOURCE), runc fails with "unable to apply caps: operation not permitted", and kind,
# which always runs its nodes --privileged, cannot start. The shim (runc-shim.sh, installed as
# dockerd's default runtime) removes exactly the missing capabilities from the OCI bundle's
# config.json (create/run) and from the --process file (exec), then runs the real runc.
#
# State (pidfile, log, the installed shim): $SCG_CACHE_DIR/engine, default
# ~/.cache/servicecidr-guard/engine.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${SCG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/servicecidr-guard}
state=$cache_root/engine
runtime_name=scg-runc
log() { printf '[engine] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

as_root=()
((EUID == 0)) || as_root=(sudo)

engine_answers() { docker info >/dev/null 2>&1; }

# The capabilities the kernel knows (0..cap_last_cap) that this process's bounding set lacks, as
# OCI names (CAP_SYS_RESOURCE ...), one per line. Empty where nothing is missing.
missing_capabilities() {
  local last bounding bit
  last=$(cat /proc/sys/kernel/cap_last_cap)
  bounding=$((16#$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)))
  for ((bit = 0; bit <= last; bit++)); do
    ((bounding >> bit & 1)) && continue
    capsh --decode="$(printf '%x' $((1 << bit)))" | sed 's/.*=//' | tr '[:lower:]' '[:upper:]'
  done
}

# pid and start time (field 22 of /proc/PID/stat) of the dockerd we started: a recycled PID is not it.
our_dockerd() {
  local pid start now
  [[ -f $state/dockerd.pid ]] || return 1
  read -r pid start <"$state/dockerd.pid" || return 1
  now=$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $now == "$start" && $(readlink "/proc/$pid/exe" 2>/dev/null) == */dockerd ]] || return 1
  echo "$pid"
}

install_docker() {
  command -v apt-get >/dev/null || die "no Docker engine and no apt-get to install one: install Docker (https://docs.docker.com/engine/install/)"
  log "installing Debian's docker.io"
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends docker.io >/dev/null
}

start_dockerd() {
  local missing runtime_flags=()
  mkdir -p "$state"
  mapfile -t missing < <(missing_capabilities)
  if ((${#missing[@]} > 0)); then
    log "this machine's capability bounding set lacks ${missing[*]}: privileged containers get them removed by a runc shim"
    command -v jq >/dev/null || die "jq is needed by the runc shim"
    local runc
    runc=$(command -v runc) || die "runc not found (it comes with docker.io)"
    # A copy, so the running engine does not depend on this checkout staying where it is.
    sed -e "s|@RUNC@|$runc|" -e "s|@DROP@|$(printf '%s\n' "${missing[@]}" | jq -R . | jq -cs .)|" \
      "$here/runc-shim.sh" >"$state/runc-shim"
    chmod 755 "$state/runc-shim"
    runtime_flags=(--add-runtime "$runtime_name=$state/runc-shim" --default-runtime "$runtime_name")
  fi
  log "starting dockerd (log: $state/dockerd.log)"
  # setsid: the engine outlives this script and the make that ran it, as a service would.
  "${as_root[@]}" setsid dockerd "${runtime_flags[@]}" </dev/null >>"$state/dockerd.log" 2>&1 &
  local pid=$! start=''
  for _ in $(seq 50); do
    start=$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$pid/stat" 2>/dev/null) && break
    sleep 0.1
  done
  echo "$pid $start" >"$state/dockerd.pid"
  for _ in $(seq 120); do
    engine_answers && { log "dockerd ready (pid $pid)"; return 0; }
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$state/dockerd.log" >&2; die "dockerd exited"; }
    sleep 0.5
  done
  tail -n 20 "$state/dockerd.log" >&2
  die "dockerd did not answer within 60 s"
}

up() {
  if engine_answers; then
    if our_dockerd >/dev/null; then log "dockerd (started by this script) answers"; else log "a Docker engine answers; leaving it alone"; fi
    return 0
  fi
  command -v dockerd >/dev/null || install_docker
  command -v docker >/dev/null || die "dockerd is installed but the docker client is not"
  start_dockerd
}

down() {
  local pid
  if ! pid=$(our_dockerd); then
    log "no dockerd started by this script is running; nothing to stop"
    rm -f "$state/dockerd.pid"
    return 0
  fi
  log "stopping dockerd (pid $pid)"
  "${as_root[@]}" kill -TERM "$pid"
  for _ in $(seq 300); do
    our_dockerd >/dev/null || { rm -f "$state/dockerd.pid"; log "stopped"; return 0; }
    sleep 0.1
  done
  die "dockerd (pid $pid) did not stop within 30 s"
}

status() {
  if ! engine_answers; then
    echo "no Docker engine answers"
    return 1
  fi
  local runtime
  runtime=$(docker info --format '{{.DefaultRuntime}}')
  if our_dockerd >/dev/null; then
    echo "dockerd started by hack/containers/engine.sh (pid $(our_dockerd)), default runtime $runtime"
  else
    echo "a Docker engine not started by this script answers, default runtime $runtime"
  fi
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  *) sed -n 's/^#   //p' "$0" >&2; exit 2 ;;
esac
