#!/usr/bin/env bash
# pg-tree.sh DIR: a private PostgreSQL "installation" in DIR holding this
# checkout's build of pg_inbox, with nothing written outside DIR.
#
# PostgreSQL finds its share and lib directories relative to its own binary,
# so copies of the server binaries beside links to everything the system
# installed (plus our own files, installed with DESTDIR) make an installation
# that needs neither root nor sudo, and that no other checkout on the machine
# can change under a running test.
set -euo pipefail
dir=${1:?usage: pg-tree.sh DIR}
bindir=$(pg_config --bindir)
libdir=$(pg_config --pkglibdir)
sharedir=$(pg_config --sharedir)

rm -rf "$dir"
mkdir -p "$dir$bindir" "$dir$libdir" "$dir$sharedir/extension"
for exe in postgres initdb pg_ctl; do cp "$bindir/$exe" "$dir$bindir/"; done
for f in "$libdir"/*; do ln -s "$f" "$dir$libdir/"; done
for f in "$sharedir"/*; do [ "$(basename "$f")" = extension ] || ln -s "$f" "$dir$sharedir/"; done
for f in "$sharedir"/extension/*; do ln -s "$f" "$dir$sharedir/extension/"; done
# Our own files replace any system-installed pg_inbox.
rm -f "$dir$libdir"/pg_inbox.so "$dir$sharedir"/extension/pg_inbox*
rm -rf "$dir$libdir/bitcode"   # JIT inlining is not needed for tests
make -s --no-print-directory -C "$(dirname "$0")/.." install DESTDIR="$dir" >/dev/null
echo "$dir$bindir"
