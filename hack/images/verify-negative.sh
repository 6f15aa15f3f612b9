#!/usr/bin/env bash
# Shows that make image-verify fails when what it checks is broken (make image-verify-negative):
# each case breaks guarantees on purpose, runs hack/images/verify.sh, and passes only if verify.sh
# fails and names every broken guarantee.
#
#   contents   an image FROM IMG with a /bin/sh, a dev-only package under /app/node_modules and
#              /app/src added: verify.sh must report all three before starting anything
#   identity   an image FROM IMG whose USER is 0:0, run by verify.sh with VERIFY_WEAKEN naming
#              every protection (no --user, --cap-drop ALL, no-new-privileges, --read-only): it
#              must report the process's UIDs and GID, its capabilities, NoNewPrivs, the writable
#              root and the image's USER
#
# The broken images are tagged servicecidr-guard-broken:CASE and removed afterwards. Its own
# control plane ports: VERIFY_PORT_BASE (default 23100). Needs what hack/images/verify.sh needs.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
log() { printf '[image-verify-negative] %s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

version=$(jq -r .version package.json)
img=${IMG:-servicecidr-guard:$version}
out=${OUT:-$repo/_output/image-verify-negative}
docker image inspect "$img" >/dev/null 2>&1 || die "image $img not found: run make image"
rm -rf "$out"
mkdir -p "$out"
# The broken images' build context, outside the repository (eslint and tsc read what is inside it).
context=$(mktemp -d)
trap 'rm -rf "$context"; docker rmi -f servicecidr-guard-broken:contents servicecidr-guard-broken:identity >/dev/null 2>&1 || true' EXIT

# The same BuildKit-capable docker CLI that make image uses (hack/containers/buildx.sh).
docker_build=$("$repo/hack/containers/buildx.sh" --cli)
broken_image() {
  local tag=$1
  DOCKER_BUILDKIT=1 "$docker_build" build -q -t "servicecidr-guard-broken:$tag" -f - "$context" >/dev/null
}

# expect_failure CASE MESSAGE...: verify.sh on that case fails, and its output holds every MESSAGE.
expect_failure() {
  local name=$1 status=0
  shift
  VERIFY_PORT_BASE=${VERIFY_PORT_BASE:-23100} OUT=$out/$name hack/images/verify.sh >"$out/$name.log" 2>&1 || status=$?
  ((status != 0)) || { cat "$out/$name.log" >&2; die "$name: image-verify passed a broken image"; }
  for message in "$@"; do
    grep -qF -- "FAIL: $message" "$out/$name.log" || { cat "$out/$name.log" >&2; die "$name: image-verify did not report '$message'"; }
  done
  log "$name: image-verify failed as it must, with $(grep 'FAIL: ' "$out/$name.log" | grep -vc 'check(s) failed$') failed checks, among them: $(printf '%s; ' "$@")"
}

dev_package=$(jq -r '[.packages | to_entries[] | select(.value.dev == true and (.key | test("^node_modules/[^/]+$"))) | .key][0]' package-lock.json)
[[ $dev_package == node_modules/* ]] || die "no top-level dev-only package in package-lock.json"
printf '#!/nothing\n' >"$context/sh"
chmod 0755 "$context/sh"
echo '{"name": "a-dev-only-package"}' >"$context/package.json"
echo 'not part of the image' >"$context/notes.txt"
broken_image contents <<EOF
FROM $img
COPY sh /bin/sh
COPY package.json /app/$dev_package/package.json
COPY notes.txt /app/src/notes.txt
EOF
IMG=servicecidr-guard-broken:contents expect_failure contents \
  "the runtime image contains /bin/sh" "dev-only packages in the image: app/$dev_package/" "unexpected entries in /app: src"

broken_image identity <<EOF
FROM $img
USER 0:0
EOF
IMG=servicecidr-guard-broken:identity VERIFY_WEAKEN=user,cap-drop,no-new-privileges,read-only expect_failure identity \
  "process UIDs are 0/0/0/0, expected 65532" "process GID is 0, expected 65532" "capabilities left:" \
  "NoNewPrivs is 0" "root file system is writable" "image USER is '0:0', not 65532:65532"

log "PASS: every check of image-verify failed on the image or run that breaks it"
