#!/usr/bin/env bash
# Installs what `make test` needs on a Debian-like machine: Debian packages that are missing, the
# npm dependencies exactly as locked, and the control plane built from Go modules (cached).
# Safe to run again: each step is skipped when already done. `make install` then sets up the
# container engine (hack/containers/engine.sh, hack/containers/buildx.sh).
#
#   hack/install.sh                  (make install)
#   INSTALL_BETA=1 hack/install.sh   the BETA_KUBE_VERSION control plane too
#
# Needs: apt-get (and root or sudo) for missing packages, Go 1.26, npm.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
log() { printf '[install] %s\n' "$*" >&2; }

# openssl: certificates for the local control plane and tests; jq, curl: the hack/ scripts;
# iproute2 (ss): port checks in local-up; git, make: the build itself; shellcheck: make lint;
# mmdebstrap: the local base images (hack/images/bases.sh); libcap2-bin (capsh): the container
# engine's capability check, setcap for the kind node image; gcc, libc6-dev: the static pause binary
# of the kind node image (hack/kind/node/binaries.sh).
packages=(openssl jq curl ca-certificates iproute2 git make shellcheck mmdebstrap libcap2-bin gcc libc6-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if ((${#missing[@]} > 0)); then
  command -v apt-get >/dev/null || { log "missing ${missing[*]} and no apt-get to install them"; exit 1; }
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  log "installing Debian packages: ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  log "Debian packages present: ${packages[*]}"
fi

command -v go >/dev/null || { log "Go is needed to build the control plane (1.26+): https://go.dev/doc/install"; exit 1; }
command -v npm >/dev/null || { log "npm is needed (any Node.js; the project installs Node 24 for itself)"; exit 1; }

log "npm ci"
npm ci --no-audit --no-fund

log "control plane (cached per version)"
hack/control-plane/build.sh "${KUBE_VERSION:-}" >/dev/null
if [[ ${INSTALL_BETA:-0} == 1 ]]; then
  # shellcheck source=versions.env
  source hack/versions.env
  hack/control-plane/build.sh "$BETA_KUBE_VERSION" >/dev/null
fi
log "done"
