# Sourced by run.sh and stop.sh: where `make run` keeps its state, and
# whether what it started still runs. Everything lives in .local/ of this
# checkout, so `make stop` finds it whatever the shell or terminal:
#   .local/cluster-dir    the private cluster's directory
#   .local/run.pid        a foreground `make run` (scripts/run.sh)
#   .local/receiver.pid   the receiver it started
#   .local/receiver.toml  examples/receiver.toml with the chosen listen address
#   .local/ports          PGPORT and HTTP_PORT of the running stack
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=$root/.local

# The cluster lives under the project folder, unless the server user cannot
# reach it (a checkout in /root, say): then a fixed folder of this checkout's own.
cluster_dir=$root/.local/pg
if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$root"; then
  cluster_dir=/var/tmp/pg_inbox-$(echo "$root" | md5sum | cut -c1-8)
fi

# pid_running FILE NAME: the pid in FILE is another live process whose
# command line mentions NAME (a stale file whose pid was reused does not count).
pid_running() {
  local pid
  [ -f "$1" ] && pid=$(cat "$1") && [ -n "$pid" ] && [ "$pid" != $$ ] && kill -0 "$pid" 2>/dev/null \
    && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"
}

cluster_running() {  # cluster_running DIR
  [ -f "$1/data/postmaster.pid" ] && kill -0 "$(head -1 "$1/data/postmaster.pid")" 2>/dev/null
}
