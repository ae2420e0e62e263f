# The billing service (API + worker in one process). Needs DATABASE_URL; see
# docker-compose.yml and docs/operations.md.

# Build stage: the full (dev) install compiles src/ and worker/ into dist/ (npm's
# `prepare` runs bin/build.js; docs/decisions/compiled-build.md).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY src ./src
COPY worker ./worker
RUN npm ci --no-audit --no-fund

# The image: production dependencies, the compiled dist/ and the migrations; no
# TypeScript sources, no compiler.
FROM node:24-bookworm-slim
WORKDIR /app
# Production: committed migrations only, stricter defaults (docs/operations.md).
ENV NODE_ENV=production
COPY package.json package-lock.json ./
COPY bin ./bin
# Production dependencies only (`prepare` finds no TypeScript here and builds nothing).
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY --from=build /app/dist ./dist
COPY db ./db

# .data holds the generated webhook encryption key when WEBHOOK_ENCRYPTION_KEY is unset.
RUN mkdir -p .data && chown node:node .data
USER node

ENV PORT=3000
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"

# One plain node process: SIGTERM reaches it directly and drains requests. Not `npm
# start` (npm relays signals). A small young generation keeps the idle RSS low
# (bench/RESULTS.md, "Start-up and footprint").
CMD ["node", "--max-semi-space-size=16", "dist/src/main.js"]
