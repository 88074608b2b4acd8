#!/usr/bin/env bash
# Starts a throwaway 3-node Citus cluster on loopback (a coordinator and two workers) from the
# PostgreSQL server binaries and the citus extension already installed on this machine (Citus
# is in no package registry: docs/scaling.md says how to get it; this script builds nothing),
# and prints the coordinator's URL, ready for ctxd and for TEST_CITUS_URL.
#   url=$(scripts/citus-cluster.sh start DIR)   # DIR must not exist
#   scripts/citus-cluster.sh stop DIR
# Each node: fsync off, `citus.node_conninfo = 'sslmode=disable'` (loopback), and
# `citus.recover_2pc_interval = -1`, so `pg_dist_transaction` keeps every two-phase commit for
# counting. The database `ctxd` exists on every node with the extension, and the coordinator
# knows both workers. As root the nodes run as the `postgres` system user.
set -euo pipefail

cmd=${1:?start|stop}
dir=${2:?directory}
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
psql_at() { # psql_at PORT DB SQL
  as_pg "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -c "$3" >/dev/null
}

case "$cmd" in
  start)
    [ -e "$dir" ] && { echo "citus-cluster: $dir exists" >&2; exit 2; }
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    trap 'echo "citus-cluster: start failed; logs:" >&2; tail -n 20 "$dir"/*.log >&2 2>/dev/null' ERR
    ports=()
    for node in coordinator worker-1 worker-2; do
      port=$(free_port)
      ports+=("$port")
      as_pg "$bin/initdb" -D "$dir/$node" -U postgres --auth=trust --no-sync -E UTF8 \
        --locale-provider=icu --icu-locale=en-US --locale=C >"$dir/$node-initdb.log" 2>&1
      cat >>"$dir/$node/postgresql.conf" <<CONF
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = off
max_connections = 300
citus.node_conninfo = 'sslmode=disable'
citus.recover_2pc_interval = -1
CONF
      echo "$port" >"$dir/$node.port"
      as_pg "$bin/pg_ctl" -D "$dir/$node" -l "$dir/$node.log" -w start >/dev/null
      psql_at "$port" postgres "CREATE DATABASE ctxd"
      psql_at "$port" ctxd "CREATE EXTENSION citus"
    done
    psql_at "${ports[0]}" ctxd "SELECT citus_set_coordinator_host('127.0.0.1', ${ports[0]})"
    psql_at "${ports[0]}" ctxd "SELECT citus_add_node('127.0.0.1', ${ports[1]})"
    psql_at "${ports[0]}" ctxd "SELECT citus_add_node('127.0.0.1', ${ports[2]})"
    echo "postgres://postgres@127.0.0.1:${ports[0]}/ctxd"
    ;;
  stop)
    for node in coordinator worker-1 worker-2; do
      [ -d "$dir/$node" ] && as_pg "$bin/pg_ctl" -D "$dir/$node" -m fast stop >/dev/null 2>&1 || true
    done
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
