#!/usr/bin/env bash
# Fuzzes the receiver's parsers with libFuzzer (clang): the request head
# (scan_head, then Beast's parser) and each signature scheme's headers.
#   scripts/fuzz.sh [TOTAL_SECONDS]   (default 300; `make test` runs 20)
# Builds into build-fuzz/ with ASan and UBSan; the corpus grows there, seeded
# from fuzz/corpus/. Exits non-zero on the first crash, leak or timeout; the
# input that caused it is in build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-300}
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found: install clang and libclang-rt-14-dev (scripts/deps.sh)" >&2; exit 1; }
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
echo "fuzz: building the targets (build-fuzz/, clang, ASan+UBSan)"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="$flags" -DINBOX_FUZZ=ON -DINBOX_RECEIVER_TESTS=OFF >/dev/null
cmake --build build-fuzz -j2 --target fuzz_targets
targets=(request_head signature_github signature_stripe signature_shopify signature_slack
         signature_standard signature_hmac)
per=$(( total / ${#targets[@]} ))
[ "$per" -ge 1 ] || per=1
mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus"
  seeds=()
  [ -d "fuzz/corpus/$t" ] && seeds=("fuzz/corpus/$t")
  echo "fuzz: $t for ${per} s"
  log=build-fuzz/$t.log
  rc=0
  INBOX_FUZZ_SEED_DIR="$corpus" "build-fuzz/fuzz_$t" -max_total_time="$per" -max_len=8192 -timeout=5 \
    -rss_limit_mb=1024 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-" \
    "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$log" | tr '\n' ' ' || true
  echo
  if [ "$rc" -ne 0 ]; then
    tail -40 "$log" >&2
    echo "fuzz: $t FAILED (exit $rc; the input is in build-fuzz/artifacts/)" >&2
    exit 1
  fi
done
echo "fuzz: all targets ran ${per} s each without a finding"
