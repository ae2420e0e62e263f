# The billing service (API + worker in one process). Needs DATABASE_URL; see
# docker-compose.yml and docs/operations.md.
FROM node:24-bookworm-slim

WORKDIR /app
# Production: committed migrations only, stricter defaults (docs/operations.md).
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# Production dependencies only (tsx runs the TypeScript sources; no build step).
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY src ./src
COPY worker ./worker
COPY db ./db
COPY bin ./bin
COPY tsconfig.json ./

# .data holds the generated webhook encryption key when WEBHOOK_ENCRYPTION_KEY is unset.
RUN mkdir -p .data && chown node:node .data
USER node

ENV PORT=3000
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"

# One node process with tsx loaded as a hook: SIGTERM reaches it directly and drains
# requests. Not `npm start`, nor the tsx command, which relays signals to a child and
# kills it (exit 130/143, no drain) when the child does not acknowledge within 30 ms,
# as happens on a loaded machine.
CMD ["node", "--import", "tsx", "src/main.ts"]
