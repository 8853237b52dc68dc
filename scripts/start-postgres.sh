#!/usr/bin/env bash
# Starts a throwaway PostgreSQL for the tests: a private data directory and a free port on
# 127.0.0.1, trust authentication (loopback only). initdb refuses to run as root, so as root
# the server runs as the postgres user. Prints `export` lines:
#   TEST_DATABASE_URL (an admin connection), THINKUS_PG_DATA, THINKUS_PG_PID.
# Usage: eval "$(scripts/start-postgres.sh [DIR])"; stop with scripts/stop-postgres.sh.
set -euo pipefail

find_bin() {
  local name=$1
  for dir in /usr/lib/postgresql/*/bin /usr/local/pgsql/bin /usr/local/bin /usr/bin; do
    if [ -x "$dir/$name" ]; then echo "$dir/$name"; return 0; fi
  done
  command -v "$name" 2>/dev/null || return 1
}

initdb=$(find_bin initdb) || { echo "start-postgres: initdb not found (apt-get install -y postgresql)" >&2; exit 1; }
pg_ctl=$(find_bin pg_ctl) || { echo "start-postgres: pg_ctl not found" >&2; exit 1; }

base="${1:-$(mktemp -d /tmp/thinkus-pg.XXXXXX)}"
data="$base/data"
mkdir -p "$base"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

as_owner() {
  if [ "$(id -u)" = "0" ]; then
    chown -R postgres "$base"
    su postgres -s /bin/bash -c "$*"
  else
    bash -c "$*"
  fi
}

if [ ! -f "$data/PG_VERSION" ]; then
  as_owner "'$initdb' -D '$data' -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >'$base/initdb.log' 2>&1" \
    || { echo "start-postgres: initdb failed, see $base/initdb.log" >&2; cat "$base/initdb.log" >&2; exit 1; }
fi
as_owner "'$pg_ctl' -D '$data' -l '$base/server.log' -w -t 60 -o \"-p $port -k '$base' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200\" start >/dev/null" \
  || { echo "start-postgres: the server did not start, see $base/server.log" >&2; cat "$base/server.log" >&2; exit 1; }

pid=$(head -n 1 "$data/postmaster.pid")
echo "export TEST_DATABASE_URL='postgres://postgres@127.0.0.1:$port/postgres'"
echo "export THINKUS_PG_DATA='$data'"
echo "export THINKUS_PG_PID='$pid'"
