# servicecidr-guard: the webhook server on Node.js 24 LTS.
#
#   docker build -t servicecidr-guard:dev .        (or: make image IMG=...)
#
# Three stages: `build` compiles TypeScript with the dev dependencies, `prod-deps` installs the
# production dependencies alone, and the runtime image gets only dist/, those node_modules and
# package.json. `make image-verify` runs the built image (hack/images/verify.sh).
#
# Needs BuildKit (`RUN --mount=type=cache`; any Docker from 23.0, or DOCKER_BUILDKIT=1). There is no
# `# syntax=` line on purpose: BuildKit's built-in Dockerfile frontend has every feature used here,
# and a syntax line would make each build fetch the frontend image from a registry.
#
# Base images, pinned by tag (this file was written where no registry could be queried for digests;
# pin @sha256 digests in your build pipeline, e.g. with Renovate, for reproducible images):
# - node:24.21-bookworm-slim: the Node.js line the project requires (package.json engines, the
#   `node` devDependency is 24.21) on Debian 12, used only to build.
# - gcr.io/distroless/nodejs24-debian12:nonroot: Node.js 24 on Debian 12 (same libc as the build
#   stage) with no shell, no package manager and user 65532. Distroless publishes no per-patch
#   tags, so the Node 24 patch level is whatever that tag held when the image was built.
ARG BUILD_IMAGE=node:24.21-bookworm-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12:nonroot

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
COPY package.json package-lock.json ./
# --ignore-scripts: the only install script in the tree is the `node` devDependency's (allowed in
# package.json's allowScripts), which downloads a second Node.js for npm scripts on developer
# machines. This image already is Node.js 24, so it is skipped, and nothing else runs at install.
RUN --mount=type=cache,target=/root/.npm npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM ${BUILD_IMAGE} AS prod-deps
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
COPY package.json package-lock.json ./
# Production dependencies only: no TypeScript, no test runner, no `node` package. No dependency
# install script runs. Type declarations are never loaded at run time; dropping them saves about a
# third of the tree.
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --ignore-scripts \
 && find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.d.ts.map' \) -delete

FROM ${RUNTIME_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=""
LABEL org.opencontainers.image.title="servicecidr-guard" \
      org.opencontainers.image.description="Validating admission webhook that governs Kubernetes ServiceCIDR ranges: overlaps, allowed blocks, safe deletion." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
WORKDIR /app
# Owned by root and not writable by the process: it cannot change its own code. package.json is
# needed at run time: its "type": "module" makes Node load dist/*.js as ES modules.
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
# Numeric, so that the kubelet can check runAsNonRoot without reading /etc/passwd.
USER 65532:65532
# 9443: HTTPS webhook (POST /validate). 8081: plain HTTP /livez, /readyz, /metrics.
EXPOSE 9443 8081
# Exec form, node as PID 1: SIGTERM reaches the server directly (no shell in between), and it
# drains in-flight reviews before exiting. Arguments come from the Deployment (`serve ...`), heap
# sizes from its NODE_OPTIONS. --no-parallel-scavenge: a young-generation collection here copies
# about 100 KB, too little to share out. Shared with V8's worker threads, its pause was mostly the
# wait for a worker to be scheduled: 0.8-0.9 ms (median) with the node's cores busy, against
# 0.5 ms on the main thread alone (docs/benchmarks.md, "Thirty-second pass"). NODE_OPTIONS does not
# accept this flag, so it is here, and the benchmarks read it from this line (bench/replica.ts).
ENTRYPOINT ["/nodejs/bin/node", "--no-parallel-scavenge", "/app/dist/main.js"]
