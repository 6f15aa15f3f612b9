#!/usr/bin/env bash
# Prints the kubectl to use: $KUBECTL if set; else the kubectl that hack/control-plane/build.sh
# built for DEFAULT_KUBE_VERSION, if it is in the cache (its kustomize is the one the manifests
# are checked with); else `kubectl` from PATH. Never builds anything: `make control-plane` does.
set -euo pipefail

if [[ -n ${KUBECTL:-} ]]; then
  echo "$KUBECTL"
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../versions.env
source "$here/../versions.env"
# The cache layout of hack/control-plane/build.sh.
cache_root=${SCG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/servicecidr-guard}
cached=$cache_root/control-plane/$DEFAULT_KUBE_VERSION/kubectl
if [[ -x $cached ]]; then
  echo "$cached"
elif command -v kubectl >/dev/null; then
  echo kubectl
else
  echo "find-kubectl: no kubectl: run 'make control-plane' (builds $DEFAULT_KUBE_VERSION) or install one" >&2
  exit 1
fi
