#!/usr/bin/env bash
# Stops the PostgreSQL started by start-postgres.sh and removes its directory.
set -u
[ -n "${THINKUS_PG_DATA:-}" ] || exit 0
pg_ctl=$(ls /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | head -n 1)
pg_ctl=${pg_ctl:-$(command -v pg_ctl)}
if [ "$(id -u)" = "0" ]; then
  su postgres -s /bin/bash -c "'$pg_ctl' -D '$THINKUS_PG_DATA' -m fast stop" >/dev/null 2>&1
else
  "$pg_ctl" -D "$THINKUS_PG_DATA" -m fast stop >/dev/null 2>&1
fi
rm -rf "$(dirname "$THINKUS_PG_DATA")"
