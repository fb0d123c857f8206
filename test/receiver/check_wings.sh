#!/bin/sh
# Fails when a wing of the receiver includes another wing, or common/
# includes any wing: wings (intake, backfill, alerts, forward) stand on
# common/ alone, and only main.cpp sees them all.
# usage: check_wings.sh RECEIVER_DIR
dir=${1:?receiver directory}
status=0
for wing_dir in "$dir"/*/; do
  wing=$(basename "$wing_dir")
  for other_dir in "$dir"/*/; do
    other=$(basename "$other_dir")
    [ "$other" = "$wing" ] && continue
    [ "$other" = common ] && continue
    if grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]$other/" "$wing_dir"; then
      echo "wing check: $wing/ includes $other/ (wings never include each other; move shared code to common/)" >&2
      status=1
    fi
  done
done
[ $status -eq 0 ] && echo "wing check: ok ($(ls -d "$dir"/*/ | wc -l) directories)"
exit $status
