# wait_http URL [PID]: waits up to 10 s for URL to answer 2xx; returns 1 if it
# never does, or at once if PID (the server's) has exited. Sourced by
# scripts/run.sh, bench/receiver/common.sh and test/browser/status_page.sh.
wait_http() {
  local url=$1 pid=${2:-}
  for _ in $(seq 100); do
    curl -sf "$url" >/dev/null 2>&1 && return 0
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && return 1
    sleep 0.1
  done
  return 1
}
