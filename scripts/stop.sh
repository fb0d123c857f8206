#!/usr/bin/env bash
# `make stop`: ends what `make run` started from this checkout, foreground or
# detached, from any terminal: the run itself, its receiver, its cluster.
set -euo pipefail
source "$(dirname "$0")/run-state.sh"
stopped=0

# wait_gone PID SECONDS
wait_gone() {
  for _ in $(seq $(( $2 * 10 ))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  return 1
}

# A foreground `make run` stops its receiver and cluster itself on TERM
# (after the build step it may be in, hence the long wait).
if pid_running "$state/run.pid" scripts/run.sh; then
  pid=$(cat "$state/run.pid")
  kill "$pid"
  wait_gone "$pid" 300 || echo "make stop: make run (pid $pid) did not end; stopping what it started" >&2
  echo "stopped make run (pid $pid)"
  stopped=1
fi
if pid_running "$state/receiver.pid" inbox-receiver; then
  pid=$(cat "$state/receiver.pid")
  kill "$pid"
  wait_gone "$pid" 30 || { echo "make stop: inbox-receiver (pid $pid) ignored TERM for 30 s" >&2; exit 1; }
  echo "stopped inbox-receiver (pid $pid)"
  stopped=1
fi
dir=$(cat "$state/cluster-dir" 2>/dev/null || echo "$cluster_dir")
if cluster_running "$dir"; then
  bash "$root/scripts/cluster.sh" stop "$dir"
  echo "stopped the cluster in $dir"
  stopped=1
fi
rm -f "$state/run.pid" "$state/receiver.pid" "$state/ports"
[ "$stopped" = 1 ] || echo "make stop: nothing started by make run is running in this checkout"
