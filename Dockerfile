# syntax=docker/dockerfile:1
# The Safety Records Service. Node 24 runs the TypeScript sources as they are (type stripping);
# the service process runs them bundled into one file (dist/service.mjs, built by src/build.ts
# as `npm start` builds it: less memory, docs/design.md), the admin CLI runs them as they are.
# The image is the sources, the bundle, the SQL migrations and the production dependencies. docker-compose.yml runs it against PostgreSQL 18; docs/deployment.md walks
# through it.

# Dependencies: production only, with install scripts on. The project's postinstall patches
# postgres.js (src/platform/db/patch-postgres.ts), and the service refuses to start without the patch.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY src/platform/db/patch-postgres.ts src/platform/db/postgres-patch.ts src/platform/db/
RUN npm ci --omit=dev && npm cache clean --force

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY sql ./sql
COPY src ./src
RUN node src/build.ts
# The code stays root's and read-only to the service. DATA_DIR (./.data) is the one place it may
# write: the secrets key file when SECRETS_KEY is unset, or an embedded PostgreSQL when
# DATABASE_URL is unset (both for trying the image alone; compose sets both).
RUN mkdir .data && chown node:node .data
USER node
EXPOSE 3000
# /readyz answers 200 on every replica that can serve (capture's leader or a standby); asked on
# the operations port (OPS_PORT), which listens on loopback unless OPS_HOST says otherwise. The
# image has no curl: Node's own fetch asks.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.OPS_PORT || 9464) + '/readyz', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# glibc's malloc, tuned as npm start tunes it (docs/benchmarks.md, bench:soak): two arenas, not
# eight per core, for Node's threads; a fixed 128 KB mmap and trim threshold, so freed large
# buffers go back to the system instead of fragmenting the heap (RSS 198 -> 175 MB steady).
ENV GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072
# Node itself is PID 1 and handles SIGTERM: in-flight work finishes, the checkpoint is stored.
CMD ["node", "--max-semi-space-size=4", "--max-old-space-size=512", "dist/service.mjs"]
