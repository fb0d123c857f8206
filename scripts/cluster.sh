#!/usr/bin/env bash
# A private PostgreSQL 15 cluster in a directory of our own, with pg_cron
# preloaded and the pg_inbox extension created in one database.
#
#   cluster.sh create DIR PORT DB   initdb, configure, start, create DB + extensions
#                                   (server binaries from $INBOX_PG_BINDIR, default
#                                   the system's; remembered for start and stop)
#   cluster.sh start DIR            start an existing cluster
#   cluster.sh stop DIR             fast shutdown (no-op when not running)
#   cluster.sh free-port FROM       first port >= FROM nobody listens on; FROM `any`:
#                                   a free port the kernel picks (parallel runs do not collide)
#
# Postgres refuses to run as root, so as root the server runs as `postgres`.
# Auth is trust on loopback and the socket dir: a throwaway dev/test cluster only.
set -euo pipefail

bindir_of() {  # the server binaries a cluster was created with
  if [ -f "$1/bindir" ]; then cat "$1/bindir"; else echo "${INBOX_PG_BINDIR:-$(pg_config --bindir)}"; fi
}

as_server_user() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

cmd=${1:?usage: cluster.sh create|start|stop|free-port ...}
case "$cmd" in
  free-port)
    port=${2:-55432}
    if [ "$port" = any ]; then
      perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(Listen => 1,
        LocalAddr => "127.0.0.1", LocalPort => 0)->sockport'
      echo; exit 0
    fi
    while port_in_use "$port"; do port=$((port + 1)); done
    echo "$port" ;;

  create)
    dir=${2:?DIR}; port=${3:?PORT}; db=${4:?DB}
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    bindir=${INBOX_PG_BINDIR:-$(pg_config --bindir)}
    echo "$bindir" > "$dir/bindir"
    as_server_user "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust \
      --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
    cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'pg_cron'
cron.database_name = '$db'
max_connections = 200
max_prepared_transactions = 10
shared_buffers = 256MB
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
CONF
    "$0" start "$dir"
    psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
      -c "CREATE DATABASE $db"
    psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d "$db" -v ON_ERROR_STOP=1 \
      -c "CREATE EXTENSION pg_cron" -c "CREATE EXTENSION pg_inbox"
    ;;

  start)
    dir=${2:?DIR}
    as_server_user "$(bindir_of "$dir")/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ;;

  stop)
    dir=${2:?DIR}
    [ -f "$dir/data/postmaster.pid" ] || exit 0
    as_server_user "$(bindir_of "$dir")/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null ;;

  *) echo "cluster.sh: unknown command $cmd" >&2; exit 2 ;;
esac
