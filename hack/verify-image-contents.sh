#!/usr/bin/env bash
# Proves what the Dockerfile puts in the image, without Docker: repeats its stages in a clean
# temporary directory, checks the production tree, then starts the server from that tree.
#
#   hack/verify-image-contents.sh            (make image-verify)
#
# Stages, as in the Dockerfile:
#   build      copy package.json, package-lock.json, tsconfig*.json, src/; npm ci --ignore-scripts;
#              npm run build                    (REUSE_DIST=1: copy the repository's dist/ instead)
#   prod-deps  copy package.json, package-lock.json; npm ci --omit=dev --ignore-scripts; drop type
#              declarations
#   runtime    node_modules + dist/ + package.json, nothing else
# Checks:
#   - no package the lockfile marks dev-only is in the production tree (the `node` package included)
#   - the production tree's size, printed, and refused above MAX_TREE_MIB (default 150)
#   - `node dist/main.js serve` starts from the runtime directory with a throwaway self-signed
#     certificate and config/policies/gke-beta.yaml, and GET /livez on the health port answers 200;
#     then SIGTERM, and the process must exit by itself.
#     With KUBECONFIG set it is passed as --kubeconfig (the cache can then sync and /readyz is
#     shown); without it, a kubeconfig pointing at a closed local port is used: /livez must not
#     depend on the apiserver.
#
# Environment: NODE (default: the repository's node_modules/.bin/node, Node 24), KUBECONFIG,
# REUSE_DIST=1, SKIP_SERVE=1 (stop after the tree checks), KEEP_TMP=1, MAX_TREE_MIB.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '[verify-image] %s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

node=${NODE:-$repo/node_modules/.bin/node}
[[ -x $node ]] || die "no Node.js at $node (run npm ci in the repository, or set NODE)"
node_version=$("$node" --version)
[[ $node_version == v24.* ]] || die "Node.js 24 is required (the image runs 24), $node is $node_version"
# npm and the shebangs of npm scripts (tsc) must find the same Node 24 first.
PATH="$(dirname "$(readlink -f "$node")"):$PATH"
export PATH
command -v npm >/dev/null || die "npm is not installed"
command -v openssl >/dev/null || die "openssl is not installed"
command -v curl >/dev/null || die "curl is not installed"

tmp=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  if [[ ${KEEP_TMP:-} == 1 ]]; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
export NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false

# --- build stage ----------------------------------------------------------------------------
if [[ ${REUSE_DIST:-} == 1 ]]; then
  [[ -f $repo/dist/main.js ]] || die "REUSE_DIST=1 but $repo/dist/main.js does not exist (npm run build)"
  dist=$repo/dist
  log "build: reusing $dist"
else
  log "build: npm ci --ignore-scripts && npm run build in $tmp/build"
  mkdir "$tmp/build"
  cp "$repo/package.json" "$repo/package-lock.json" "$repo/tsconfig.json" "$repo/tsconfig.build.json" "$tmp/build/"
  cp -R "$repo/src" "$tmp/build/src"
  (cd "$tmp/build" && npm ci --ignore-scripts --loglevel=error && npm run build --silent) >&2
  dist=$tmp/build/dist
fi

# --- prod-deps stage ------------------------------------------------------------------------
log "prod-deps: npm ci --omit=dev --ignore-scripts in $tmp/app"
mkdir "$tmp/app"
cp "$repo/package.json" "$repo/package-lock.json" "$tmp/app/"
(cd "$tmp/app" && npm ci --omit=dev --ignore-scripts --loglevel=error) >&2
find "$tmp/app/node_modules" -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.d.ts.map' \) -delete

# --- runtime layout -------------------------------------------------------------------------
cp -R "$dist" "$tmp/app/dist"
rm -f "$tmp/app/package-lock.json"
app=$tmp/app

# --- checks on the tree ---------------------------------------------------------------------
# Every lockfile entry marked dev (only reachable from devDependencies) must be absent.
mapfile -t dev_paths < <(cd "$repo" && "$node" -e '
  const lock = JSON.parse(require("node:fs").readFileSync("package-lock.json", "utf8"))
  for (const [path, entry] of Object.entries(lock.packages)) if (entry.dev === true) console.log(path)
')
[[ ${#dev_paths[@]} -gt 0 ]] || die "the lockfile lists no dev-only package: cannot check anything"
present=()
for path in "${dev_paths[@]}"; do [[ -e $app/$path ]] && present+=("$path"); done
[[ ${#present[@]} -eq 0 ]] || die "dev-only packages in the production tree: ${present[*]}"
[[ ! -e $app/node_modules/node && ! -e $app/node_modules/.bin/node ]] || die "the npm 'node' package is in the production tree"
mapfile -t dev_names < <("$node" -e 'console.log(Object.keys(require(process.argv[1]).devDependencies ?? {}).join("\n"))' "$repo/package.json")
log "ok: none of the ${#dev_paths[@]} dev-only lockfile packages is present (devDependencies: ${dev_names[*]})"

prod_count=$("$node" -e 'console.log(Object.keys(require(process.argv[1]).packages).length)' "$app/node_modules/.package-lock.json")
tree_kib=$(du -sk "$app/node_modules" | cut -f1)
dist_kib=$(du -sk "$app/dist" | cut -f1)
max_mib=${MAX_TREE_MIB:-150}
log "production tree: node_modules $((tree_kib / 1024)) MiB (${prod_count} packages), dist ${dist_kib} KiB; limit ${max_mib} MiB"
log "largest packages:"
(cd "$app/node_modules" && du -sk -- @*/* [!@]* 2>/dev/null | sort -rn | head -5 | awk '{ printf "[verify-image]   %6.1f MiB  %s\n", $1 / 1024, $2 }') >&2
(( tree_kib <= max_mib * 1024 )) || die "node_modules is larger than ${max_mib} MiB"
# The runtime directory holds exactly what the Dockerfile copies.
extra=()
for entry in "$app"/* "$app"/.[!.]*; do
  [[ -e $entry ]] || continue
  case ${entry##*/} in node_modules | dist | package.json) ;; *) extra+=("${entry##*/}") ;; esac
done
[[ ${#extra[@]} -eq 0 ]] || die "unexpected files in the runtime directory: ${extra[*]}"

if [[ ${SKIP_SERVE:-} == 1 ]]; then
  log "SKIP_SERVE=1: not starting the server"
  exit 0
fi

# --- start the server -----------------------------------------------------------------------
[[ -f $app/dist/main.js ]] || die "dist/main.js was not built: the \`serve\` command does not exist yet on this branch"

free_port() { "$node" -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })'; }
port=$(free_port)
health_port=$(free_port)
while [[ $health_port == "$port" ]]; do health_port=$(free_port); done

mkdir "$tmp/tls" "$tmp/policy"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=servicecidr-guard-verify -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' \
  -keyout "$tmp/tls/tls.key" -out "$tmp/tls/tls.crt" 2>/dev/null
cp "$repo/config/policies/gke-beta.yaml" "$tmp/policy/policy.yaml"

if [[ -n ${KUBECONFIG:-} ]]; then
  kubeconfig=$KUBECONFIG
  log "serve: --kubeconfig $kubeconfig (from KUBECONFIG)"
else
  # An apiserver that is not there: the cache never syncs, but liveness must not care.
  closed_port=$(free_port)
  kubeconfig=$tmp/kubeconfig
  cat > "$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: nowhere
    cluster:
      server: https://127.0.0.1:$closed_port
      insecure-skip-tls-verify: true
users:
  - name: nobody
    user:
      token: not-a-token
contexts:
  - name: nowhere
    context: {cluster: nowhere, user: nobody}
current-context: nowhere
EOF
  log "serve: KUBECONFIG is not set; using a kubeconfig that points at a closed port (127.0.0.1:$closed_port)"
fi

# Run from the runtime directory with a clean environment, as the image would, plus the one variable
# the Deployment sets (POD_NAMESPACE, where the shared reservations Lease is found).
(
  cd "$app"
  exec env -i PATH=/usr/bin:/bin HOME=/nonexistent POD_NAMESPACE=servicecidr-guard-system "$node" dist/main.js serve \
    --policy "$tmp/policy/policy.yaml" --tls-cert "$tmp/tls/tls.crt" --tls-key "$tmp/tls/tls.key" \
    --port "$port" --health-port "$health_port" --host 127.0.0.1 \
    --kubeconfig "$kubeconfig" --log-level info --shutdown-timeout 5
) > "$tmp/server.log" 2>&1 &
server_pid=$!
log "serve: pid $server_pid, webhook https://127.0.0.1:$port, health http://127.0.0.1:$health_port"

status=000
for _ in $(seq 1 60); do
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/server.log" >&2; die "the server exited during start-up"; }
  status=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$health_port/livez" || true)
  [[ $status == 200 ]] && break
  sleep 0.5
done
if [[ $status != 200 ]]; then
  tail -n 50 "$tmp/server.log" >&2
  die "GET /livez answered $status, not 200, within 30 s"
fi
log "ok: GET /livez -> 200"
readyz=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$health_port/readyz" || true)
log "GET /readyz -> $readyz (200 needs a reachable apiserver and a synced cache)"

kill -TERM "$server_pid"
for _ in $(seq 1 40); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.25; done
if kill -0 "$server_pid" 2>/dev/null; then
  tail -n 50 "$tmp/server.log" >&2
  die "the server did not exit within 10 s of SIGTERM"
fi
exit_code=0
wait "$server_pid" || exit_code=$?
server_pid=
log "SIGTERM: the server exited with status $exit_code"
[[ $exit_code == 0 ]] || { tail -n 50 "$tmp/server.log" >&2; die "non-zero exit after SIGTERM"; }
log "ok: the image contents start and stop cleanly"
