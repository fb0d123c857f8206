#!/usr/bin/env bash
# Slow-drip check: N connections that send a request one header byte at a
# time (every DRIP_S seconds) hold N of the receiver's worker threads. With N
# at least [http] threads, a well-behaved request waits until a dripper
# gives up. This script measures how long /healthz takes under that.
#
#   bench/receiver/slow_drip.sh PORT THREADS [DRIP_S]
set -euo pipefail
port=${1:?PORT}; n=${2:?THREADS}; drip=${3:-2}
pids=()
for _ in $(seq "$n"); do
  (
    exec 3<>"/dev/tcp/127.0.0.1/$port"
    printf 'POST /webhooks/github HTTP/1.1\r\nHost: x\r\n' >&3
    for _ in $(seq 30); do sleep "$drip"; printf 'X' >&3 || exit 0; done
  ) 2>/dev/null &
  pids+=($!)
done
sleep 1
t0=$(date +%s.%N)
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "http://127.0.0.1:$port/healthz" || true)
t1=$(date +%s.%N)
printf 'slow-drip: %d drippers (1 byte / %ss) against %d threads: /healthz answered %s after %.1f s\n' \
  "$n" "$drip" "$n" "${code:-none}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
kill "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true
