# Sourced by test.sh and bench.sh: installs what is missing, builds, and
# starts a throwaway cluster, stopped and removed when the caller exits.
#   source scripts/throwaway-cluster.sh NAME FIRST_PORT|any DATABASE
# Leaves root, tmp and port set and PGHOST/PGPORT/PGUSER/PGDATABASE exported.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

bash scripts/deps.sh
make -s extension receiver RECEIVER_TESTS=ON   # the receiver and its tests, failing loudly

tmp=$(mktemp -d "/tmp/pg_inbox-$1.XXXXXX")
chmod 755 "$tmp"
# A private installation holding this checkout's build: no root, no sudo, and
# no other checkout's `make install` can change it under a running suite.
export INBOX_PG_BINDIR
INBOX_PG_BINDIR=$(bash scripts/pg-tree.sh "$tmp/install")
port=$(bash scripts/cluster.sh free-port "$2")
cleanup() { bash "$root/scripts/cluster.sh" stop "$tmp" || true; rm -rf "$tmp"; }
trap cleanup EXIT
bash scripts/cluster.sh create "$tmp" "$port" "$3"
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=$3
