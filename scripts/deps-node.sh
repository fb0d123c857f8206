#!/usr/bin/env bash
# The forwarder tests verify signatures on the consumer side with the
# Standard Webhooks reference library: node plus the npm package
# standardwebhooks, pinned in test/forward/package-lock.json. Installs only
# what is missing (called by deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "deps: installing nodejs npm"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends nodejs npm
fi
lock=test/forward/package-lock.json
stamp=test/forward/node_modules/.installed-lock
if ! cmp -s "$lock" "$stamp" 2>/dev/null; then
  npm ci --prefix test/forward --no-audit --no-fund --loglevel=error
  cp "$lock" "$stamp"
fi
