#!/usr/bin/env bash
# Start/stop a throwaway PostgreSQL on loopback from the machine's binaries; prints its URL on start.
# initdb refuses to run as root, so the cluster belongs to the `postgres` user when we are root.
set -euo pipefail
dir=${PG_DIR:-/tmp/massgen-ci-pg}
port=${PG_PORT:-55432}
bin=$(dirname "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "${1:-start}" in
  start)
    as_pg "$bin/pg_ctl" -D "$dir" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"; mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    as_pg "$bin/initdb" -D "$dir" -U postgres -A trust --no-sync >/dev/null
    as_pg "$bin/pg_ctl" -D "$dir" -l "$dir/log" -w \
      -o "-p $port -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    as_pg "$bin/pg_ctl" -D "$dir" -m fast stop >/dev/null
    ;;
esac
