#!/usr/bin/env bash
# What PostgreSQL's CPU an append costs in each statement shape, replayed with pgbench against
# ctxd's own schema (docs/benchmarks.md, "Append at the limit": "One statement per append").
#
#   benches/append_shapes/run.sh PGDATA HOST PORT [APPENDS]
#
# PGDATA is the cluster's data directory (its postmaster's CPU, and that of the backends it
# reaped, is what is counted: run it on a cluster nothing else uses). HOST is a host name or the
# socket directory. A fresh database is made and migrated by target/release/ctxd (build it
# first); each shape appends APPENDS (20000) one-message appends from one pgbench client, twice,
# the shapes alternating.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=$1 host=$2 port=$3 appends=${4:-20000}
bin=/usr/lib/postgresql/15/bin
[ -x "$bin/pgbench" ] || bin=$(dirname "$(command -v pgbench)")
db="append_shapes_$(date +%s)"
psql -h "$host" -p "$port" -U postgres -qc "CREATE DATABASE $db"
DATABASE_URL="postgres://postgres@localhost:$port/$db?host=$host" "$here/../../target/release/ctxd" migrate >/dev/null 2>&1
psql -h "$host" -p "$port" -U postgres -d "$db" -qc \
  "CREATE TABLE bench_dbcost_counters (id text PRIMARY KEY, last bigint NOT NULL);
   CREATE TABLE bench_dbcost_messages (LIKE messages INCLUDING ALL);"
tick=$(getconf CLK_TCK)
cpu() { # the cluster's CPU ticks: the postmaster's own and its reaped children's, and its live children's
  local pm t c
  pm=$(head -1 "$data/postmaster.pid")
  t=$(awk '{print $14+$15+$16+$17}' "/proc/$pm/stat")
  for c in $(pgrep -P "$pm"); do t=$((t + $(awk '{print $14+$15}' "/proc/$c/stat" 2>/dev/null || echo 0))); done
  echo "$t"
}
for round in 1 2; do
  for shape in gapless today one_statement_in_transaction one_statement_one_sync one_statement one_query_message; do
    mode=prepared run="'r$round'"
    [ "$shape" = one_query_message ] && mode=simple run="'r${round}q'"
    [ "$mode" = prepared ] && run="r$round"
    before=$(cpu)
    out=$("$bin/pgbench" -h "$host" -p "$port" -U postgres -n -M "$mode" -c 1 -t "$appends" \
      -D "run=$run" -f "$here/$shape.sql" "$db" 2>&1) || { echo "$out"; exit 1; }
    sleep 0.5
    after=$(cpu)
    tps=$(grep -o 'tps = [0-9]*' <<<"$out" | head -1 | cut -d' ' -f3)
    printf '%-30s %4d us of PostgreSQL CPU per append, %5d appends/s\n' "$shape" \
      $(( (after - before) * 1000000 / tick / appends )) "$tps"
  done
done
psql -h "$host" -p "$port" -U postgres -qc "DROP DATABASE $db"
