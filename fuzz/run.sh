#!/usr/bin/env bash
# Build every fuzz target and run each for SECONDS, one after another on one worker, then write
# what each run did to fuzz/results/: TARGET.json (executions, corpus size, crashes) and
# summary.md. Exits non-zero when any target crashed (a crash, a timeout, an out-of-memory).
#
#   fuzz/run.sh SECONDS [TARGET...]     (all targets when none is named)
#   fuzz/run.sh build                   (build every target and run none: CI builds them
#                                        beside the tests)
#
# The corpus grows in fuzz/corpus/TARGET (not committed), seeded from fuzz/seeds/TARGET; a
# crashing input is kept in fuzz/artifacts/TARGET/ and named in the result.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:?usage: fuzz/run.sh SECONDS|build [TARGET...]}
shift
case $seconds in
build) ;;
*[!0-9]* | 0) echo "usage: fuzz/run.sh SECONDS|build [TARGET...] (SECONDS at least 1)" >&2; exit 2 ;;
esac
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^af-fuzz$')
fi

# cargo-fuzz needs a nightly compiler's flags: the nightly toolchain when there is one, else the
# pinned one with its unstable features unlocked.
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  fuzz=(env RUSTC_BOOTSTRAP=1 cargo fuzz)
fi
# Safe Rust needs no address sanitizer; debug assertions turn overflows into crashes.
flags=(--sanitizer none --debug-assertions)
"${fuzz[@]}" build "${flags[@]}"
[ "$seconds" = build ] && exit 0

# What libFuzzer leaves for a failed run (slow-unit-* files are only slow, not failures).
failures() {
  find "artifacts/$1" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \
    -o -name 'leak-*' \) "${@:2}"
}

summary() {
  {
    echo "# Fuzzing results"
    echo
    echo "Written by \`fuzz/run.sh\`: one run per target, single worker, in sequence."
    echo
    echo "| target | seconds | executions | exec/s | corpus files | crashes | commit | finished |"
    echo "|---|---:|---:|---:|---:|---:|---|---|"
    for json in results/*.json; do
      python3 - "$json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {r['target']} | {r['seconds']} | {r['executions']} | {r['executions_per_second']} "
      f"| {r['corpus_files']} | {r['crashes']} | {r['commit']} | {r['finished']} |")
PY
    done
  } >results/summary.md
}

mkdir -p results corpus artifacts
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
failed=0
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target" "artifacts/$target" "seeds/$target"
  before=$(failures "$target" | wc -l)
  log="artifacts/$target/last-run.log"
  set +e
  "${fuzz[@]}" run "${flags[@]}" "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="artifacts/$target/" >"$log" 2>&1
  status=$?
  set -e
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
  executions=$(stat number_of_executed_units)
  per_second=$(stat average_exec_per_sec)
  rss=$(stat peak_rss_mb)
  crashes=$(($(failures "$target" | wc -l) - before))
  [ "$status" -ne 0 ] && [ "$crashes" -le 0 ] && crashes=1 # died without an artifact
  corpus_files=$(find "corpus/$target" -type f | wc -l)
  corpus_bytes=$(du -sb "corpus/$target" | cut -f1)
  artifacts=$(failures "$target" -printf '"%f",' | sed 's/,$//')
  cat >"results/$target.json" <<JSON
{
  "target": "$target",
  "seconds": $seconds,
  "executions": ${executions:-0},
  "executions_per_second": ${per_second:-0},
  "peak_rss_mb": ${rss:-0},
  "corpus_files": $corpus_files,
  "corpus_bytes": $corpus_bytes,
  "crashes": $crashes,
  "artifacts": [$artifacts],
  "exit_status": $status,
  "commit": "$commit",
  "finished": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
JSON
  printf '%-10s %4ss  %10s execs  %6s files  %d crashes\n' "$target" "$seconds" \
    "${executions:-0}" "$corpus_files" "$crashes"
  if [ "$crashes" -gt 0 ]; then
    failed=1
    echo "fuzz target $target crashed; its log: fuzz/$log" >&2
    grep -E -m 5 'panicked|ERROR: libFuzzer|SUMMARY' "$log" >&2 || true
  fi
  summary # after each target, so a run cut short still says what it did
done

exit "$failed"
