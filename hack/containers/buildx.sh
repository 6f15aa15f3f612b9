#!/usr/bin/env bash
# Makes sure `docker build` can use BuildKit, which the Dockerfile's `RUN --mount=type=cache` needs.
#
#   hack/containers/buildx.sh        prints how builds run: "buildx <version>", or "builtin <docker CLI>"
#                                    (build with that CLI and DOCKER_BUILDKIT=1)
#   hack/containers/buildx.sh --cli  prints only the docker CLI to build with (`docker` or a path)
#
# In order:
#   1. the docker CLI on PATH has the buildx plugin: left alone;
#   2. the docker CLI on PATH is older than 23.0 (Debian 12's docker.io is 20.10): BuildKit is built
#      in (DOCKER_BUILDKIT=1), nothing to do;
#   3. the CLI on PATH is 23.0 or newer without buildx (it builds with BuildKit only through the
#      plugin), and Debian's docker.io CLI, installed beside the dockerd it came with, is at
#      /usr/bin/docker: that CLI builds, with BuildKit built in (seconds instead of minutes);
#   4. otherwise the pinned buildx is built from the Go module proxy (about 2-5 minutes once), cached
#      in the tools folder, and linked as a CLI plugin (~/.docker/cli-plugins, or
#      $DOCKER_CONFIG/cli-plugins).
#
# Needs: the docker CLI; go, only when buildx must be built.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../versions.env
source "$repo/hack/versions.env"
log() { printf '[buildx] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# answer HOW CLI: what this script prints, as asked.
answer() {
  if [[ ${1:-} == --cli ]]; then echo "$3"; else echo "$2"; fi
  exit 0
}
mode=${1:-}

if version=$(docker buildx version 2>/dev/null); then
  answer "$mode" "buildx $(awk '{ print $2 }' <<<"$version")" docker
fi
client=$(docker version --format '{{.Client.Version}}' 2>/dev/null || docker --version | sed 's/^Docker version \([0-9.]*\).*/\1/')
if ((${client%%.*} < 23)); then
  answer "$mode" "builtin $(command -v docker)" docker
fi
debian_cli=${DEBIAN_DOCKER_CLI:-/usr/bin/docker}
if [[ -x $debian_cli ]] && debian_client=$("$debian_cli" version --format '{{.Client.Version}}' 2>/dev/null) &&
  ((${debian_client%%.*} < 23)); then
  answer "$mode" "builtin $debian_cli" "$debian_cli"
fi

buildx_version=${BUILDX_VERSION:-$DEFAULT_BUILDX_VERSION}
tools=${TOOLS_DIR:-${SCG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/servicecidr-guard}/tools}
binary=$tools/docker-buildx-$buildx_version
if [[ ! -x $binary ]]; then
  command -v go >/dev/null || die "docker $client needs the buildx plugin to build with BuildKit; install it, or Go to build it"
  log "docker $client has no buildx: building buildx $buildx_version from the Go module proxy"
  gobin=$(mktemp -d)
  trap 'rm -rf "$gobin"' EXIT
  GOBIN=$gobin CGO_ENABLED=0 go install -trimpath \
    -ldflags="-s -X github.com/docker/buildx/version.Version=$buildx_version" "github.com/docker/buildx/cmd/buildx@$buildx_version"
  mkdir -p "$tools"
  mv "$gobin/buildx" "$binary"
fi
plugins=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins
mkdir -p "$plugins"
ln -sf "$binary" "$plugins/docker-buildx"
version=$(docker buildx version) || die "docker does not accept $binary as its buildx plugin"
answer "$mode" "buildx $(awk '{ print $2 }' <<<"$version")" docker
