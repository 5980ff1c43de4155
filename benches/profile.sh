#!/usr/bin/env bash
# Callgrind profiles of af-proxy under the harness's scenarios, and of one decision, as text
# summaries in benches/results/profiles/ (benches/results/profiles/README.md). Instruction
# counts, not time: a loaded machine gives the same figures.
#
#   benches/profile.sh [SCENARIO...]   # default: http-keepalive connect-bulk intercepted-https dns decide
#                                      # (http-newconn too on request; http-1mib times out under callgrind)
#   benches/profile.sh allocations     # who allocates per keep-alive request (benches/alloc-sites.awk)
#
# AF_PROFILE_KEEP=DIR keeps each scenario's callgrind file there (DIR/af-proxy-SCENARIO.callgrind),
# for questions the summaries do not answer, e.g. who calls memcpy:
#   callgrind_annotate --tree=caller DIR/af-proxy-http-keepalive.callgrind | grep -B12 '\* .*memcpy'
#
# Needs valgrind, wrk and dnsperf; builds the static af-proxy, the harness (debug: it only
# drives load, af-proxy under callgrind is the slow side) and the decision driver.
set -euo pipefail
cd "$(dirname "$0")/.."
out=benches/results/profiles
target=${CARGO_TARGET_DIR:-$PWD/target}
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(http-keepalive connect-bulk intercepted-https dns decide)
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

top() { # FILE yes|no: the first 32 rows of the function table, inclusive or self
  # awk reads to the end: a reader that stops early fails the pipe (SIGPIPE) under pipefail.
  callgrind_annotate --inclusive="$2" "$1" \
    | awk '!t && /file:function/ { t = 1; next }
           t == 1 && /^-+$/ { next }
           t == 1 && NF == 0 { t = 2 }
           t == 1 && n < 32 { n++; print }' \
    | cut -c1-220
}

summarize() { # FILE NAME WHAT [REQUESTS]: the total, per request when counted, the top functions
  local file=$1 name=$2 what=$3 requests=${4:-}
  local total
  total=$(callgrind_annotate "$file" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
  {
    echo "# $name: $what"
    echo "# made by benches/profile.sh at $(git rev-parse --short HEAD) on $(date -u +%FT%TZ)"
    echo
    echo "instructions (Ir): $total"
    if [ -n "$requests" ] && [ "$requests" -gt 0 ]; then
      echo "requests: $requests; Ir per request: $((total / requests))"
    fi
    echo
    echo "## inclusive (a function with everything it calls)"
    top "$file" yes
    echo
    echo "## self (a function's own instructions)"
    top "$file" no
  } > "$out/$name.txt"
  echo "wrote $out/$name.txt"
}

proxy_scenarios=()
for s in "${scenarios[@]}"; do [ "$s" = decide ] || proxy_scenarios+=("$s"); done

if [ ${#proxy_scenarios[@]} -gt 0 ]; then
  RUSTFLAGS='-C target-feature=+crt-static' cargo build -q --release --target x86_64-unknown-linux-gnu -p af-proxy
  cargo build -q -p af-benches
  cp "$target/x86_64-unknown-linux-gnu/release/af-proxy" "$work/af-proxy.real"
  # The harness starts this wrapper as af-proxy: callgrind around the real binary. On the
  # harness's SIGTERM the sidecar drains and callgrind writes its file; the harness may kill
  # the wrapper first, so the script waits for valgrind itself (its pid in valgrind.pid).
  for profile in "${proxy_scenarios[@]}"; do
    # `allocations` is the keep-alive run with jemalloc's entry points told apart by their
    # callers, 24 frames up, so each allocation can be charged to the code that asked for it.
    s=$profile options=
    if [ "$profile" = allocations ]; then
      s=http-keepalive
      for f in malloc mallocx calloc realloc rallocx; do options+=" --separate-callers24=_rjem_$f"; done
    fi
    cat > "$work/af-proxy" <<EOF
#!/bin/sh
valgrind --tool=callgrind$options --callgrind-out-file="$work/callgrind.out" "$work/af-proxy.real" "\$@" 2>>"$work/valgrind.log" &
echo \$! > "$work/valgrind.pid"
trap 'kill -TERM \$(cat "$work/valgrind.pid")' TERM INT
wait
EOF
    chmod +x "$work/af-proxy"
    rm -f "$work/callgrind.out" "$work/valgrind.pid"
    AF_BENCH_READY_SECS=120 "$target/debug/af-benches" all --af-proxy "$work/af-proxy" \
      --systems af-proxy --scenarios "$s" --rounds 1 --duration 5 --idle 100 --out "$work/results" \
      >"$work/$s.table" 2>&1 &
    harness=$!
    # The counters are zeroed when the harness starts the load, so the sidecar's start-up
    # (the document, the packs, the CA) is not counted: what is left is the load and the drain.
    until grep -q "^round 1/1 $s" "$work/$s.table"; do
      kill -0 "$harness" 2>/dev/null || break
      sleep 0.2
    done
    callgrind_control -z "$(cat "$work/valgrind.pid")" >/dev/null
    wait "$harness"
    cat "$work/$s.table"
    tail --pid="$(cat "$work/valgrind.pid")" -f /dev/null
    row=$(grep -m1 "^$s" "$work/$s.table" | tr -s ' ')
    # Requests (or DNS queries) in the 5 s: the rate times 5; a tunnel's rate is bytes.
    case $(cut -d' ' -f4 <<<"$row") in
      req/s | qps) count=$(awk '{ printf "%d", $3 * 5 }' <<<"$row") ;;
      *) count= ;;
    esac
    if [ "$profile" = allocations ]; then
      {
        echo "# af-proxy-allocations: who allocates in one 5 s run of the harness's $s scenario under callgrind ($(cut -d' ' -f3-4 <<<"$row"))"
        echo "# made by benches/profile.sh at $(git rev-parse --short HEAD) on $(date -u +%FT%TZ); read by benches/alloc-sites.awk"
        echo
        awk -v requests="$count" -f benches/alloc-sites.awk "$work/callgrind.out"
      } > "$out/af-proxy-allocations.txt"
      echo "wrote $out/af-proxy-allocations.txt"
    else
      summarize "$work/callgrind.out" "af-proxy-$s" \
        "af-proxy under callgrind, one 5 s run of the harness's $s scenario ($(cut -d' ' -f3-4 <<<"$row") under callgrind)" \
        "$count"
    fi
    if [ -n "${AF_PROFILE_KEEP:-}" ]; then
      mkdir -p "$AF_PROFILE_KEEP"
      cp "$work/callgrind.out" "$AF_PROFILE_KEEP/af-proxy-$profile.callgrind"
    fi
  done
fi

if printf '%s\n' "${scenarios[@]}" | grep -qx decide; then
  cargo build -q --release -p af-policy --example decide
  driver=$target/release/examples/decide
  {
    echo "# one decision: instructions (callgrind Ir) per Catalogue::decide, the criterion bench's requests"
    echo "# made by benches/profile.sh at $(git rev-parse --short HEAD): (Ir of 200000 decisions - Ir of 0) / 200000"
    echo
    printf '%-10s %8s %14s\n' kind rules "Ir/decision"
    for rules in 10 10000; do
      for kind in exact wildcard miss; do
        ir() { valgrind --tool=callgrind --callgrind-out-file="$work/d.out" "$driver" count "$kind" "$rules" "$1" 2>&1 \
          | sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'; }
        base=$(ir 0); many=$(ir 200000)
        printf '%-10s %8s %14s\n' "$kind" "$rules" "$(( (many - base) / 200000 ))"
      done
    done
  } > "$out/decide-ir.txt"
  echo "wrote $out/decide-ir.txt"
  valgrind --tool=callgrind --callgrind-out-file="$work/decide.out" "$driver" count exact 10000 200000 2>/dev/null
  summarize "$work/decide.out" decide-exact-10000 "200 000 exact decisions against 10 000 rules (policy/examples/decide.rs)"
fi
