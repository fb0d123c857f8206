#!/usr/bin/env bash
# Installs the Debian packages pg_inbox needs, only when one is missing:
# apt-get update costs ~10 s, so a warm machine skips it.
set -euo pipefail

# pg_prove is only a Recommends of postgresql-15-pgtap, hence named here.
# chromium: the status page's browser test; python3-jsonschema/-yaml: the
# Alertmanager payload checked against its OpenAPI schema (make test).
packages=(
  build-essential pkg-config cmake perl bc curl clang-format
  postgresql-15 postgresql-server-dev-15 postgresql-15-cron
  postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl
  libpq-dev libssl-dev libcpp-httplib-dev libtomlplusplus-dev libsimdjson-dev libboost1.81-dev
  googletest libgtest-dev wrk clang libclang-rt-14-dev
  chromium python3-jsonschema python3-yaml
)

bash "$(dirname "$0")/deps-node.sh"   # node + standardwebhooks for the forwarder tests

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
