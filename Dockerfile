# boarding-connector container image.
#   docker build -t boarding-connector .
#   docker run -v bc-state:/var/lib/boarding-connector -v ./config.yaml:/etc/boarding-connector/config.yaml:ro \
#     -e BOARDING_API_KEY=pk_live_… boarding-connector            # runs the daemon (`run`)
# See docs/deploy.md. NODE_IMAGE lets an air-gapped build point at a mirrored base image.
ARG NODE_IMAGE=node:24-bookworm-slim

# ---- build: dev dependencies, TypeScript compile, native better-sqlite3 ----
FROM ${NODE_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# Compile better-sqlite3 against the headers shipped in the image (/usr/local/include/node) instead
# of downloading prebuilt binaries or headers at build time: reproducible, and works offline.
ENV npm_config_nodedir=/usr/local \
    npm_config_build_from_source=true \
    npm_config_audit=false \
    npm_config_fund=false \
    npm_config_update_notifier=false
# Only better-sqlite3 needs its install script (a native build); the other packages with scripts
# are test tooling, so scripts are skipped and that one module is rebuilt explicitly.
# Optional npm registry (a bank's mirror); empty means npm's default.
ARG NPM_REGISTRY=
# Extra root CAs (a TLS-intercepting proxy) for the downloads below; see docker/ca-certificates/.
COPY docker/ca-certificates/ /tmp/extra-ca/
RUN cat /etc/ssl/certs/ca-certificates.crt > /tmp/build-ca.pem 2>/dev/null || true; \
    for f in /tmp/extra-ca/*.pem /tmp/extra-ca/*.crt; do [ -f "$f" ] && cat "$f" >> /tmp/build-ca.pem; done; true
# better-sqlite3 12 (node::ObjectWrap) compiled against Node >= 24.19 headers aborts the process
# ("Assertion failed: (env) != nullptr" in RemoveEnvironmentCleanupHook, from Statement::~Statement)
# when statements are garbage collected at exit or outside a JS context (nodejs/node#65446). Built
# against the 24.18 headers it runs cleanly on later 24.x. better-sqlite3 13 (N-API) avoids this
# but needs Node >= 22, and the project still supports Node 20. The headers come from the npm
# registry's node-linux-<arch> package, like the base image's Node itself.
ARG ADDON_HEADERS_VERSION=24.18.1
COPY package.json package-lock.json ./
RUN if [ -n "$NPM_REGISTRY" ]; then npm config set registry "$NPM_REGISTRY"; fi \
 && export NODE_EXTRA_CA_CERTS=/tmp/build-ca.pem \
 && mkdir -p /opt/addon-headers && cd /opt/addon-headers \
 && npm pack --silent "node-linux-$(node -p process.arch)@${ADDON_HEADERS_VERSION}" > name.txt \
 && tar xzf "$(tail -n 1 name.txt)" package/include && mv package/include . && rm -rf package ./*.tgz name.txt \
 && cd /app \
 && npm ci --ignore-scripts \
 && npm_config_nodedir=/opt/addon-headers npm rebuild better-sqlite3
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build \
 && npm prune --omit=dev \
 && rm -f /root/.npmrc

# ---- runtime: production dependencies only, non-root ----
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    BOARDING_CONFIG=/etc/boarding-connector/config.yaml
WORKDIR /app
# The official image ships user "node" (uid 1000); create it if a mirrored base lacks it.
RUN if ! id node >/dev/null 2>&1; then groupadd --gid 1000 node && useradd --uid 1000 --gid node --create-home node; fi \
 && mkdir -p /var/lib/boarding-connector /etc/boarding-connector \
 && chown node:node /var/lib/boarding-connector
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY mappings ./mappings
COPY docker/healthcheck.mjs ./docker/healthcheck.mjs
COPY docker/config.example.yaml /etc/boarding-connector/config.example.yaml
# State (SQLite), file-core packages and reports live here; mount a volume to keep them.
VOLUME ["/var/lib/boarding-connector"]
USER node
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "/app/docker/healthcheck.mjs"]
# Exec form: node is PID 1 and receives SIGTERM directly (drains, then exits 0).
ENTRYPOINT ["node", "dist/main.js"]
CMD ["run"]
