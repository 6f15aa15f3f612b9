#!/usr/bin/env bash
# A runc wrapper that dockerd runs as its default runtime on machines whose capability bounding set
# lacks some capabilities (hack/containers/engine.sh installs a copy with @RUNC@ and @DROP@ filled
# in). `--privileged` asks for every capability; runc cannot grant one the machine does not have
# and refuses to start the container. This removes the missing ones, nothing else:
#   create / run: from process.capabilities in the OCI bundle's config.json (--bundle / -b);
#   exec:         from capabilities in the process file (--process / -p).
# Every other call, and every argument, reaches the real runc unchanged.
# Needs: jq.
set -euo pipefail

runc='@RUNC@'
drop='@DROP@'

# strip FILE FILTER_PATH: rewrite FILE with the dropped capabilities removed from each list under
# FILTER_PATH (bounding, effective, inheritable, permitted, ambient); atomic, keeps the file's mode.
strip() {
  local file=$1 path=$2 tmp
  [[ -f $file ]] || return 0
  tmp=$(mktemp "$file.XXXXXX")
  jq --argjson drop "$drop" \
    "if $path == null then . else $path |= map_values(if . == null then . else map(select(. as \$c | \$drop | index(\$c) | not)) end) end" \
    "$file" >"$tmp"
  chmod --reference="$file" "$tmp"
  mv "$tmp" "$file"
}

args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --bundle | -b) strip "${args[i + 1]:-}/config.json" .process.capabilities ;;
    --bundle=*) strip "${args[i]#--bundle=}/config.json" .process.capabilities ;;
    --process | -p) strip "${args[i + 1]:-}" .capabilities ;;
    --process=*) strip "${args[i]#--process=}" .capabilities ;;
  esac
done
exec "$runc" "$@"
