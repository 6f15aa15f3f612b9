#!/usr/bin/env bash
# Makes sure `docker build` can use BuildKit, which the Dockerfile's `RUN --mount=type=cache` needs.
#
#   hack/containers/buildx.sh        prints how builds run: "buildx <version>" or "builtin"
#
# Docker CLIs from 23.0 on build with BuildKit only through the buildx plugin; Docker Desktop and
# docker-ce ship it, Debian 12's docker.io does not. Where the CLI lacks it, the pinned buildx is
# built from the Go module proxy (about 2-5 minutes once), cached in the tools folder, and linked
# as a CLI plugin (~/.docker/cli-plugins, or $DOCKER_CONFIG/cli-plugins). A CLI older than 23.0 (Debian's
# 20.10) has BuildKit built in (DOCKER_BUILDKIT=1) and needs nothing. A CLI that has buildx is
# left alone.
#
# Needs: the docker CLI; go, only when buildx must be built.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../versions.env
source "$repo/hack/versions.env"
log() { printf '[buildx] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if version=$(docker buildx version 2>/dev/null); then
  echo "buildx $(awk '{ print $2 }' <<<"$version")"
  exit 0
fi
client=$(docker version --format '{{.Client.Version}}' 2>/dev/null || docker --version | sed 's/^Docker version \([0-9.]*\).*/\1/')
if ((${client%%.*} < 23)); then
  echo builtin
  exit 0
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
echo "buildx $(awk '{ print $2 }' <<<"$version")"
