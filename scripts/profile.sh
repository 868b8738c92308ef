#!/usr/bin/env bash
# Profiles one `ttl-sweeper sweep` (the `profiling` Cargo profile: release code with symbols)
# against the benchmark's instant fake DynamoDB endpoint (a separate process on 127.0.0.1), and
# prints where the sweeper's CPU goes, by group and by function.
#
#   scripts/profile.sh [ITEMS_PER_WINDOW]   # 16 windows (the default lookback) x 10000 by default
#   BASELINE=path/to/older/ttl-sweeper scripts/profile.sh   # an older build beside this one
#   PROFILE_DELAY=5-10 scripts/profile.sh   # the fake answers after a random 5-10 ms, as DynamoDB
#                                           # does in-Region (default 0: at once)
#
# Sampling uses perf's software clock (`-e cpu-clock`): hardware counters are not available in
# every VM; call stacks are unwound from DWARF (release code keeps no frame pointers), so each
# sample is also counted by what its stack was inside (the SDK's request pipeline, hyper's
# connection tasks, the sweep engine). As in `make bench`'s 1-core rows, the sweeper runs pinned to the first CPU and the fake
# to the last (`taskset`), so the two never share a CPU. Writes target/profile/, and the
# breakdown between the `profile` markers of docs/BENCHMARKS.md (`make bench` keeps that block).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PER_WINDOW="${1:-10000}"
DELAY="${PROFILE_DELAY:-0}"
OUT=target/profile
mkdir -p "$OUT"
LAST_CPU=$(( $(nproc) - 1 ))

BIN="${PROFILE_BIN:-target/profiling/ttl-sweeper}"
FAKE="${PROFILE_FAKE:-$(cargo bench --bench sweeper --no-run --message-format=json 2>/dev/null |
  sed -n 's|.*"executable":"\([^"]*/deps/sweeper-[^"]*\)".*|\1|p' | tail -n 1)}"
[ -x "$BIN" ] && [ -x "$FAKE" ] || { echo "profile: build the binaries first (make profile)" >&2; exit 1; }

export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \
  AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
  TABLE_NAME=fake

# profile NAME BINARY: perf.data, the per-function report and the per-group sums of one sweep.
profile() {
  local name=$1 bin=$2 port fake_pid
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  taskset -c "$LAST_CPU" "$FAKE" --fake-dynamodb "$port" "$PER_WINDOW" "$DELAY" >/dev/null &
  fake_pid=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  AWS_ENDPOINT_URL="http://127.0.0.1:$port" perf record -q -e cpu-clock -F 4000 --call-graph dwarf,16384 \
    -o "$OUT/$name.data" -- taskset -c 0 "$bin" sweep >"$OUT/$name.json" 2>/dev/null
  kill "$fake_pid"
  wait "$fake_pid" 2>/dev/null || true
  perf report -i "$OUT/$name.data" --no-children --sort dso,sym --stdio -g none --percent-limit 0 2>/dev/null |
    grep -E '^ +[0-9.]+%' >"$OUT/$name.txt"
  # Each sample counted once, by the function it was taken in, sorted into groups (first match).
  awk '
    { pct = $1; sub(/%/, "", pct); line = $0
      if (line ~ /\[kernel.*(clear_page|folio_zero|clear_huge)/) g = "kernel: zeroing freshly faulted pages"
      else if (line ~ /\[kernel/) g = "kernel (syscalls, scheduling, TCP)"
      else if (line ~ /malloc|free|realloc|calloc|memmove|memcpy|memset|memcmp|_int_|cfree|mi_|tcache|unlink_chunk|alloc_perturb|finish_grow|raw_vec/) g = "allocator and memcpy"
      else if (line ~ /sigv4|sha2|Sha256|sha256|hmac|Hmac|canonical|percent_encod/) g = "SigV4 signing (aws-sigv4 in the SDK, sha2, hmac)"
      else if (line ~ /protocol_serde|aws_smithy_json|serde|ryu|itoa|json/) g = "JSON (de)serialization (SDK shapes, serde_json)"
      else if (line ~ /hyper|h2::|http::|httparse|http_body|HeaderMap|header|bytes::/) g = "hyper and http"
      else if (line ~ /aws_smithy|aws_runtime|aws_sdk_dynamodb|aws_types|aws_credential|aws_config|orchestrat|interceptor|ConfigBag|TypeErasedBox|tracing/) g = "SDK orchestration (config, endpoint, retries, interceptors)"
      else if (line ~ /tokio|mio|parking_lot|futures/) g = "tokio and futures"
      else if (line ~ /ttl_sweeper|hashbrown|core::hash|Hasher|sip/) g = "our code and its maps"
      else g = "other (libc, std, ...)"
      sum[g] += pct }
    END { for (g in sum) printf "%.1f\t%s\n", sum[g], g }' "$OUT/$name.txt" | sort -t$'\t' -k2 >"$OUT/$name.groups"
  # Each sample counted once more, by the first of these its call stack was inside.
  perf script -i "$OUT/$name.data" 2>/dev/null | python3 -c '
import sys
groups = [
    ("the SDK request pipeline (its orchestrator in the stack)", "aws_smithy_runtime::client::orchestrator::invoke"),
    ("HTTP connection tasks (hyper)", "hyper::proto"),
    ("the sweep engine (engine in the stack)", "ttl_sweeper::engine"),
]
counts, total = {}, 0
for sample in sys.stdin.read().split("\n\n"):
    frames = sample.strip().split("\n")[1:]
    if not frames:
        continue
    total += 1
    stack = "\n".join(frames)
    label = next((g for g, pattern in groups if pattern in stack), "other (start-up, runtime, kernel)")
    counts[label] = counts.get(label, 0) + 1
for g, n in sorted(counts.items(), key=lambda kv: -kv[1]):
    print(f"{100 * n / max(total, 1):.1f}\t{g}")
print(total, file=sys.stderr)
' >"$OUT/$name.inclusive" 2>"$OUT/$name.samples"
  local deletes samples
  deletes=$(grep -o '"items_deleted":[0-9]*' "$OUT/$name.json" | cut -d: -f2)
  samples=$(cat "$OUT/$name.samples")
  # One cpu-clock sample per 250 µs of the sweeper's CPU time (4000 Hz).
  echo "$name: $deletes deletes, $samples samples at 4000 Hz, about $(python3 -c "print(f'{$samples * 250 / max($deletes, 1):.2f}')") µs of CPU per delete" | tee "$OUT/$name.summary"
}

# This build, and an older one beside it with BASELINE.
if [ -n "${BASELINE:-}" ]; then
  profile before "$BASELINE"
  profile now "$BIN"
  names=(before now)
  labels=("before" "now")
else
  profile now "$BIN"
  names=(now)
  labels=("this build")
fi
last=$(( ${#names[@]} - 1 ))
block="$OUT/breakdown.md"
{
  echo "Generated by \`${BASELINE:+BASELINE=<older build> }make profile\` on $(date -u +%Y-%m-%d): \`perf record -e cpu-clock --call-graph dwarf\` of one \`ttl-sweeper sweep\` (\`profiling\` build), $((16 * PER_WINDOW)) deletes, the fake $( [ "$DELAY" = 0 ] && echo "answering at once" || echo "answering each request after a random $DELAY ms (\`PROFILE_DELAY=$DELAY\`)"); the sweeper on CPU 0, the fake on CPU $LAST_CPU, \`TOKIO_WORKER_THREADS\` ${TOKIO_WORKER_THREADS:-unset}. Samples by the function they were taken in, grouped by symbol (scripts/profile.sh)."
  echo
  for i in "${!names[@]}"; do echo "- ${labels[i]}: $(cut -d' ' -f2- "$OUT/${names[i]}.summary")"; done
  echo
  if [ "$last" = 1 ]; then
    echo "| group | ${labels[0]} | ${labels[1]} |"
    echo "|---|---|---|"
    join -t$'\t' -1 2 -2 2 -a 1 -a 2 -e 0.0 -o 0,1.1,2.1 \
      <(sort -t$'\t' -k2 "$OUT/${names[0]}.groups") <(sort -t$'\t' -k2 "$OUT/${names[1]}.groups") |
      sort -t$'\t' -k3 -rn | awk -F'\t' '{printf "| %s | %s %% | %s %% |\n", $1, $2, $3}'
  else
    echo "| group | share |"
    echo "|---|---|"
    sort -t$'\t' -k1 -rn "$OUT/${names[0]}.groups" | awk -F'\t' '{printf "| %s | %s %% |\n", $2, $1}'
  fi
  echo
  echo "By call stack (first match: SDK pipeline, hyper tasks, sweep engine):"
  echo
  for i in "${!names[@]}"; do
    echo "- ${labels[i]}: $(awk -F'\t' '{printf "%s%s %% %s", (NR > 1 ? "; " : ""), $1, $2}' "$OUT/${names[i]}.inclusive")"
  done
  echo
  echo "Top functions, ${labels[last]}:"
  echo
  echo '```'
  head -n 15 "$OUT/${names[last]}.txt" | sed 's/  */ /g' | cut -c1-150
  echo '```'
} >"$block"
cat "$block"

doc=docs/BENCHMARKS.md
if [ -f "$doc" ]; then
  python3 - "$doc" "$block" "$DELAY" <<'EOF'
import sys
doc, block, delay = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3]
text = open(doc).read()
start, end = "<!-- profile: written by make profile -->", "<!-- /profile -->"
if delay != "0":
    # The profile at DynamoDB's pace has a block of its own, after the one at once.
    after = end
    start, end = "<!-- profile-latency: written by PROFILE_DELAY=... make profile -->", "<!-- /profile-latency -->"
    if start not in text and after in text:
        text = text.replace(after, f"{after}\n\n{start}\n{end}", 1)
section = f"{start}\n{block}{end}"
if start in text and end in text:
    text = text[: text.index(start)] + section + text[text.index(end) + len(end):]
else:
    marker = "## How to reproduce"
    head = "## 8. Where the CPU goes (profile)\n\n" + section + "\n\n"
    text = text.replace(marker, head + marker) if marker in text else text + "\n" + head
open(doc, "w").write(text)
print(f"profile: wrote the breakdown into {doc}", file=sys.stderr)
EOF
fi
