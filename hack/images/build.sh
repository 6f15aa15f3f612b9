#!/usr/bin/env bash
# Builds the container image from the Dockerfile (make image).
#
#   hack/images/build.sh                          IMG=servicecidr-guard:<package.json version>
#   IMG=registry.example.com/scg:v1 hack/images/build.sh
#   BASE_IMAGES=local hack/images/build.sh        force the locally built base images
#
# BASE_IMAGES chooses the Dockerfile's BUILD_IMAGE and RUNTIME_IMAGE:
#   upstream  the Dockerfile's own defaults (node:24.x-bookworm-slim, gcr.io/distroless/nodejs24-debian12),
#             pulled from their registries: what users build
#   local     stand-ins built from Debian packages and the `node` npm package (hack/images/bases.sh),
#             for machines that reach no container registry
#   auto      (default) upstream when both bases are already present locally or both registries
#             answer; local otherwise. Prints which, and why.
#
# Needs: a Docker engine (hack/containers/engine.sh up) with BuildKit: the Dockerfile's
# `RUN --mount=type=cache` needs it (hack/containers/buildx.sh says how: the buildx plugin, or a
# docker CLI with BuildKit built in). Prints the image's size and the build time.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
log() { printf '[image] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

version=$(jq -r .version package.json)
img=${IMG:-servicecidr-guard:$version}
mode=${BASE_IMAGES:-auto}

docker info >/dev/null 2>&1 || die "no Docker engine answers: run hack/containers/engine.sh up (make container-engine)"
docker_build=$("$repo/hack/containers/buildx.sh" --cli)

# The Dockerfile's defaults, read from the file itself so that this script cannot drift from it.
default_arg() { sed -n "s/^ARG $1=//p" Dockerfile; }
upstream_build=$(default_arg BUILD_IMAGE)
upstream_runtime=$(default_arg RUNTIME_IMAGE)
[[ -n $upstream_build && -n $upstream_runtime ]] || die "Dockerfile has no default BUILD_IMAGE / RUNTIME_IMAGE"

# registry_answers IMAGE: the registry of IMAGE answers HTTPS at all (any HTTP status: 401 is normal).
registry_answers() {
  local host=${1%%/*}
  [[ $1 == */* && $host == *.* ]] || host=registry-1.docker.io
  [[ $(curl -sS -m 5 -o /dev/null -w '%{http_code}' "https://$host/v2/" 2>/dev/null) != 000 ]]
}
present() { docker image inspect "$1" >/dev/null 2>&1; }

if [[ $mode == auto ]]; then
  if present "$upstream_build" && present "$upstream_runtime"; then
    mode=upstream why="both upstream bases are present locally"
  elif registry_answers "$upstream_build" && registry_answers "$upstream_runtime"; then
    mode=upstream why="their registries answer"
  else
    mode=local why="no registry answers for $upstream_build / $upstream_runtime"
  fi
  log "base images: $mode ($why)"
fi

args=(--build-arg "VERSION=$version" --build-arg "REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)")
case $mode in
  upstream) ;;
  local)
    bases=$("$repo/hack/images/bases.sh")
    build_image=$(sed -n 's/^BUILD_IMAGE=//p' <<<"$bases")
    runtime_image=$(sed -n 's/^RUNTIME_IMAGE=//p' <<<"$bases")
    args+=(--build-arg "BUILD_IMAGE=$build_image" --build-arg "RUNTIME_IMAGE=$runtime_image")
    log "bases: $build_image, $runtime_image"
    ;;
  *) die "BASE_IMAGES must be auto, upstream or local, not '$mode'" ;;
esac

t0=$(date +%s.%N)
log "building with $docker_build"
DOCKER_BUILDKIT=1 "$docker_build" build -t "$img" "${args[@]}" .
seconds=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }')
size=$(docker image inspect -f '{{.Size}}' "$img")
log "built $img in $seconds s: $(numfmt --to=iec-i --suffix=B "$size") ($size bytes)"
