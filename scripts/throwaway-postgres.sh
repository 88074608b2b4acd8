#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster from the machine's server binaries and prints its URL.
#   url=$(scripts/throwaway-postgres.sh start DIR)   # DIR must not exist
#   scripts/throwaway-postgres.sh stop DIR
#   scripts/throwaway-postgres.sh pause DIR    # stop the server (immediate), keep the data
#   scripts/throwaway-postgres.sh resume DIR   # start it again on the same port
# As root (CI), the cluster runs as the `postgres` system user, since initdb refuses root.
set -euo pipefail

cmd=${1:?start|stop}
dir=${2:?directory}
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    trap 'echo "throwaway-postgres: start failed; logs:" >&2; cat "$dir"/*.log >&2 2>/dev/null' ERR
    # ICU en-US: text sorts as in most production databases, not in byte order.
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 \
      --locale-provider=icu --icu-locale=en-US --locale=C >"$dir/initdb.log" 2>&1
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    echo "$port" > "$dir/port"
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o \
      "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
    as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres ctxd
    echo "postgres://postgres@127.0.0.1:$port/ctxd"
    ;;
  pause)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null
    ;;
  resume)
    port=$(cat "$dir/port")
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o \
      "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
    ;;
  stop)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop|pause|resume DIR" >&2; exit 2 ;;
esac
