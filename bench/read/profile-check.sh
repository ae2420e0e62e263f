#!/bin/sh
# Instructions per entitlement check (issue 33), counted, not timed: runs the check's
# statement (src/operations/gate.ts GATE_RUN on a leased token, as billing_api) N times
# in one `postgres --single` session under callgrind, on a copy of a seeded cluster,
# and prints (N=220 run - N=20 run) / 200. Each check is its own transaction, as in the
# API. A prelude file (optional; statements separated by an empty line) runs first and
# is committed, on a fresh copy of DATADIR for each run: replace a function there to
# see its share.
# Usage: profile-check.sh DATADIR DBNAME KEYHASH [PRELUDE.sql]
# With BARE_COMMUNITY=<community id> it counts the bare anchor's statement instead
# (bench_bare.check_entitlements: give bench/read/run.ts's BARE_SQL as the prelude).
# (DATADIR: pg_basebackup of a server holding bench/read/profile-setup.ts's database.)
set -eu
DATA=$1; DB=$2; HASH=$3; PRELUDE=${4:-}
BIN=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
TMP=$(mktemp -d); chmod 755 "$TMP"
script() {
  [ -n "$PRELUDE" ] && { cat "$PRELUDE"; printf '\n\n'; }
  printf "set role billing_api;\n\n"
  if [ -n "${BARE_COMMUNITY:-}" ]; then
    printf "prepare c(text, text, text) as select * from bench_bare.check_entitlements(\$1, \$2, \$3);\n\n"
  else
    printf "prepare c(text, text, text, jsonb, text) as select billing.gate_run(\$1, \$2, \$3, \$4, \$5) as t;\n\n"
  fi
  i=0
  while [ $i -lt "$1" ]; do
    n=$(( (i * 7919) % 100000 + 1 ))
    if [ -n "${BARE_COMMUNITY:-}" ]; then
      printf "execute c('%s', 'discord', 'd%s');\n\n" "$BARE_COMMUNITY" "$n"
    else
      printf "execute c('%s', 'members:read', 'entitlements_check', '{\"platform\": \"discord\", \"platform_uid\": \"d%s\"}', '00000000-0000-4000-8000-000000000033');\n\n" "$HASH" "$n"
    fi
    i=$((i + 1))
  done
}
count() {
  script "$1" > "$TMP/s$1.sql"
  chown -R postgres "$TMP"
  rm -rf "$TMP/data"; cp -a "$DATA" "$TMP/data"
  su postgres -c "valgrind --tool=callgrind --callgrind-out-file=$TMP/cg.$1 $BIN/postgres --single -j -D $TMP/data $DB < $TMP/s$1.sql > $TMP/out$1 2> $TMP/err$1"
  grep -q ERROR "$TMP/out$1" "$TMP/err$1" && { grep ERROR "$TMP/out$1" "$TMP/err$1" | head -3 >&2; exit 1; }
  grep '^summary:' "$TMP/cg.$1" | awk '{print $2}'
}
A=$(count 20); B=$(count 220)
rm -rf "$TMP/data"
echo "instructions per check: $(( (B - A) / 200 ))  (N=20: $A, N=220: $B; outputs in $TMP)"
