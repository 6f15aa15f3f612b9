#!/usr/bin/env bash
# Builds, from Debian packages and the Node.js 24 binary of the `node` npm package, local stand-ins
# for the two base images the Dockerfile names, for machines that reach no container registry:
#
#   $LOCAL_BASE_PREFIX/node:<node>-bookworm-slim     like node:24.x-bookworm-slim (the build stages):
#       Debian 12 minbase + ca-certificates, node in /usr/local/bin, npm in /usr/local/lib/node_modules
#   $LOCAL_BASE_PREFIX/nodejs24-debian12:<node>-nonroot   like gcr.io/distroless/nodejs24-debian12:nonroot:
#       no shell, no package manager: /nodejs/bin/node, the C and C++ runtime libraries it links,
#       CA certificates, time zones, /etc/passwd with nonroot (65532), /tmp, USER 65532
#
#   hack/images/bases.sh          build what is missing; prints BUILD_IMAGE=... and RUNTIME_IMAGE=...
#   FORCE=1 hack/images/bases.sh  rebuild even if the tags exist
#
# Cached by version: the tags carry the Node.js version, and a label records every input (Node
# version, npm version, Debian suite and snapshot date), so an image is rebuilt only when one changes.
#
# The build base trusts this machine's CA bundle (/etc/ssl/certs/ca-certificates.crt) on top of
# Debian's: npm inside `docker build` reaches the npm registry through whatever TLS interception
# this machine's network does, as the machine itself does. The runtime base carries Debian's CA
# bundle only: nothing of this machine goes into the image users run.
#
# Needs: a Docker engine (hack/containers/engine.sh up), mmdebstrap (Debian package), root (or
# mmdebstrap's unshare mode), npm, and `npm ci` done in this repository (for the node binary).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../versions.env
source "$repo/hack/versions.env"
log() { printf '[bases] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

prefix=${LOCAL_BASE_PREFIX:-servicecidr-guard.local}
suite=${DEBIAN_SUITE:-bookworm}
npm_version=${NPM_VERSION:-$DEFAULT_NPM_VERSION}
node=$repo/node_modules/node/bin/node
[[ -x $node ]] || die "$node not found: run npm ci first (the \`node\` devDependency is the Node.js 24 the images get)"
node_version=$("$node" --version)
node_version=${node_version#v}
[[ $node_version == 24.* ]] || die "the node devDependency is $node_version, expected 24.x"

build_image=$prefix/node:$node_version-$suite-slim
runtime_image=$prefix/nodejs24-debian12:$node_version-nonroot
# What the images are made of; an image whose label differs is rebuilt.
inputs="node=$node_version npm=$npm_version debian=$suite sha256=$(sha256sum "$node" | cut -c1-16)"

current() { [[ $(docker image inspect -f '{{index .Config.Labels "dev.servicecidr-guard.base-inputs"}}' "$1" 2>/dev/null) == "$inputs" ]]; }

if [[ ${FORCE:-0} != 1 ]] && current "$build_image" && current "$runtime_image"; then
  log "cached: $build_image, $runtime_image ($inputs)"
  printf 'BUILD_IMAGE=%s\nRUNTIME_IMAGE=%s\n' "$build_image" "$runtime_image"
  exit 0
fi

command -v mmdebstrap >/dev/null || die "mmdebstrap is needed (apt-get install mmdebstrap)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (hack/containers/engine.sh up)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$SECONDS

# --- Debian root file system ----------------------------------------------------------------------
# minbase: dpkg, apt, bash and coreutils; libstdc++6 for node; ca-certificates and tzdata as the
# upstream images have them.
log "mmdebstrap $suite (minbase + ca-certificates, tzdata, libstdc++6)"
mmdebstrap --quiet --variant=minbase --include=ca-certificates,tzdata,libstdc++6 \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  "$suite" "$work/debian"
snapshot=$(date -u -r "$work/debian/var/lib/dpkg/status" +%F)

root=$work/debian

# --- runtime base: only what node needs, as distroless nodejs24-debian12:nonroot lays it out ------
# Made first, while the Debian tree still holds Debian's own CA bundle only.
rt=$work/runtime
mkdir -p "$rt"/{nodejs/bin,etc/ssl/certs,usr/lib,usr/lib64,usr/share,home/nonroot,tmp}
# Merged /usr, as Debian 12 and distroless have it.
ln -s usr/lib "$rt/lib"
ln -s usr/lib64 "$rt/lib64"
chmod 1777 "$rt/tmp"
chown 65532:65532 "$rt/home/nonroot"
install -m 755 "$node" "$rt/nodejs/bin/node"
install -D -m 755 "$node" "$root/usr/local/bin/node"
# The shared libraries node links, resolved inside the Debian tree (the build base's glibc), each
# copied as a file at the path the loader looks for.
mapfile -t libraries < <(chroot "$root" ldd /usr/local/bin/node | awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
((${#libraries[@]} > 0)) || die "ldd found no libraries for node"
for library in "${libraries[@]}"; do
  install -D -m 644 "$root$library" "$rt$library"
done
chmod 755 "$rt"/lib64/ld-linux-*.so.* 2>/dev/null || true
cp "$root/etc/ssl/certs/ca-certificates.crt" "$rt/etc/ssl/certs/"
cp -a "$root/usr/share/zoneinfo" "$rt/usr/share/"
cp -L "$root/etc/os-release" "$root/etc/nsswitch.conf" "$rt/etc/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rt/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$rt/etc/group"
log "importing $runtime_image"
tar -C "$rt" -c . | docker import \
  --change "LABEL dev.servicecidr-guard.base-inputs=\"$inputs\" dev.servicecidr-guard.debian-snapshot=$snapshot" \
  --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
  --change 'USER 65532' \
  --change 'WORKDIR /home/nonroot' \
  --change 'ENTRYPOINT ["/nodejs/bin/node"]' - "$runtime_image" >/dev/null

# --- build base: Debian + node + npm, as node:<version>-bookworm-slim lays them out -------------
log "npm $npm_version (npm pack)"
(cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null)
mkdir -p "$root/usr/local/lib/node_modules/npm"
tar -xzf "$work/npm-$npm_version.tgz" -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
cat /etc/ssl/certs/ca-certificates.crt >>"$root/etc/ssl/certs/ca-certificates.crt"
log "importing $build_image"
tar -C "$root" -c . | docker import \
  --change "LABEL dev.servicecidr-guard.base-inputs=\"$inputs\" dev.servicecidr-guard.debian-snapshot=$snapshot" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["node"]' - "$build_image" >/dev/null

# Both must run node 24 as their users expect.
[[ $(docker run --rm --entrypoint /usr/local/bin/node "$build_image" --version) == "v$node_version" ]] || die "$build_image does not run node"
[[ $(docker run --rm "$runtime_image" -e 'process.stdout.write(`${process.version} ${process.getuid()}`)') == "v$node_version 65532" ]] ||
  die "$runtime_image does not run node as 65532"
log "built in $((SECONDS - t0)) s: $build_image ($(docker image inspect -f '{{.Size}}' "$build_image" | numfmt --to=iec)), $runtime_image ($(docker image inspect -f '{{.Size}}' "$runtime_image" | numfmt --to=iec))"
printf 'BUILD_IMAGE=%s\nRUNTIME_IMAGE=%s\n' "$build_image" "$runtime_image"
