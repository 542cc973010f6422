# syntax=docker/dockerfile:1
#
# One image for every ctxflow service. The container command picks the service:
#   node services/embedded/src/main.ts        (default: the three services in one process, in memory)
#   node services/session-runner/src/main.ts  (port CTXFLOW_PORT, 8080)
#   node services/feed-ingestor/src/main.ts   (port CTXFLOW_FEED_PORT, 8081)
#   node services/step-context/src/main.ts    (port CTXFLOW_STEP_CONTEXT_PORT, 8082)
# Node 24 runs the TypeScript sources directly (type stripping): there is no build step,
# and the image holds the sources as they are in the repository.
#
#   docker build -t ctxflow .
#   docker run --rm -p 8080:8080 -e CTXFLOW_HOST=0.0.0.0 -e CTXFLOW_API_KEYS=acme:secret ctxflow

ARG NODE_IMAGE=node:24-slim

# --- base: the runtime every stage shares --------------------------------------------------
FROM ${NODE_IMAGE} AS base
WORKDIR /app
# NODE_OPTIONS: V8's heap cap for the 512 MiB memory limit the manifests give each service
# (75% of it); a deployment with another limit sets its own (docs/operations.md, "Memory").
ENV NODE_ENV=production \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NODE_OPTIONS="--max-old-space-size=384 --max-semi-space-size=16"

# --- deps: production dependencies of the workspaces, from the lockfile only ---------------
# Only the manifests are copied (every workspace's: test/deploy/dockerfile.test.ts checks the
# list against package.json), so this layer is rebuilt when a dependency changes, not when a
# source file does. Install scripts are skipped: no production dependency has one, and the
# slim image has no compiler.
FROM base AS deps
COPY package.json package-lock.json ./
COPY clients/typescript/package.json clients/typescript/
COPY shared/bus/package.json shared/bus/
COPY shared/contracts/package.json shared/contracts/
COPY shared/feeds/package.json shared/feeds/
COPY shared/service-kit/package.json shared/service-kit/
COPY shared/subscriptions/package.json shared/subscriptions/
COPY shared/telemetry/package.json shared/telemetry/
COPY services/embedded/package.json services/embedded/
COPY services/feed-ingestor/package.json services/feed-ingestor/
COPY services/session-runner/package.json services/session-runner/
COPY services/step-context/package.json services/step-context/
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --ignore-scripts --no-audit

# --- runtime: dependencies, sources, an unprivileged user ----------------------------------
FROM base AS runtime
# The whole /app of deps: node_modules, the workspaces' own node_modules (npm nests a
# dependency there when versions differ) and the manifests. node_modules/@ctxflow/* are
# relative symlinks into shared/ and services/; COPY keeps them. The sources are laid over
# it (.dockerignore keeps every node_modules out of the build context).
COPY --from=deps --chown=root:root /app ./
COPY --chown=root:root shared ./shared
COPY --chown=root:root services ./services
# The files stay owned by root and read-only for the service: the process (uid 1000, the
# image's `node` user) can read its code but never rewrite it.
USER 1000:1000
EXPOSE 8080 8081 8082
# Liveness of whichever service runs: CTXFLOW_HEALTH_URL names its /healthz (compose and
# Kubernetes set their own probes). node:24-slim has no curl; Node's fetch is enough.
ENV CTXFLOW_HEALTH_URL=http://127.0.0.1:8080/healthz
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch(process.env.CTXFLOW_HEALTH_URL).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM reaches node directly (exec form): each service stops taking work, finishes what
# is in flight and closes.
STOPSIGNAL SIGTERM
CMD ["node", "services/embedded/src/main.ts"]
