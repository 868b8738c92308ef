#!/usr/bin/env bash
# Builds the test binaries of `cargo test ARGS...` and runs them TEST_JOBS at a time (default 3),
# the slowest first, from the crate's root as `cargo test` would. The integration-test binary
# (tests/suite.rs) runs once per module, each module's tests in a process of their own. One
# DynamoDB Local, started here, serves them all; a process starts its other local servers (moto)
# on free ports of 127.0.0.1 and stops them when it exits. Most of a process's time is spent
# waiting on them, on ticks and on deadlines, so running a few at once shortens `make test`
# without making any test busier than the machine can take.
#
#   scripts/run-tests.sh --lib --bins --tests --examples
#
# Prints each job's output as it finishes, then a table of jobs by time and CPU; exits 1 if any
# failed. TEST_JOBS=1 runs them one after another.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="${TEST_JOBS:-3}"
case "$JOBS" in ''|*[!0-9]*|0) echo "TEST_JOBS=$JOBS: expected a whole number of at least 1" >&2; exit 2 ;; esac
# The jobs that take longest start first (by the seconds measured on a 2-core machine: faults 77,
# precision 54, stream_follow 49, demo 49, events 46, leader_lease 37, adoption 34, index_failover 25, cli
# 21, stream_esm 14, local_dynamodb 12, stream_indexer 11, summary_line 10, handler 8).
SLOWEST_FIRST=(faults precision stream_follow demo events leader_lease adoption index_failover cli
  stream_esm local_dynamodb stream_indexer summary_line handler)

# One build (a failure stops here): its messages shown as cargo shows them, its JSON kept for
# name<TAB>executable of every test binary.
mkdir -p target
cargo test --no-run --message-format=json-render-diagnostics "$@" >target/test-binaries.json
mapfile -t built < <(python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["profile"]["test"] and m.get("executable"):
        target = m["target"]
        print(target["kind"][0] + ":" + target["name"] + "\t" + m["executable"])
' <target/test-binaries.json)
[ "${#built[@]}" -gt 0 ] || { echo "run-tests: cargo built no test binaries" >&2; exit 1; }

# A job is a name, an executable and its arguments. The suite's modules are read from its list
# of tests; a module's job names its tests exactly (a filter `events::` would also match
# `expiry_events::`).
declare -A args_of=()
jobs=()
for line in "${built[@]}"; do
  name="${line%%$'\t'*}"; exe="${line#*$'\t'}"
  if [ "$name" != test:suite ]; then jobs+=("$name"$'\t'"$exe"); continue; fi
  listed="$("$exe" --list --format terse)" || { echo "run-tests: $exe --list failed" >&2; exit 1; }
  mapfile -t modules < <(sed -n 's/^\([a-z_0-9]*\)::.*: test$/\1/p' <<<"$listed" | sort -u)
  [ "${#modules[@]}" -gt 0 ] || { echo "run-tests: $exe lists no tests" >&2; exit 1; }
  for module in "${modules[@]}"; do
    jobs+=("test:$module"$'\t'"$exe")
    args_of["test:$module"]="--exact $(sed -n "s/^\($module::.*\): test$/\1/p" <<<"$listed" | tr '\n' ' ')"
  done
done

ordered=()
for slow in "${SLOWEST_FIRST[@]}"; do
  for line in "${jobs[@]}"; do [[ "$line" == "test:$slow"$'\t'* ]] && ordered+=("$line"); done
done
for line in "${jobs[@]}"; do
  name="${line%%$'\t'*}"
  [[ " ${SLOWEST_FIRST[*]} " == *" ${name#test:} "* && "$name" == test:* ]] || ordered+=("$line")
done

# The DynamoDB Local JVMs the binaries start live for seconds to minutes: the client compiler
# alone and the serial collector spend less of the two cores on compiling and collecting
# (local_dynamodb: about half the CPU and 30 % less time; a Java option of your own is kept).
export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:+$JAVA_TOOL_OPTIONS }-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# One DynamoDB Local for every test process (DYNAMODB_ENDPOINT), rather than one each: every
# test's tables are named apart (a prefix, the process id and a count), and no test stops the
# shared server; a test that must kill or isolate a server starts one of its own. A
# DYNAMODB_ENDPOINT given is used as it is.
if [ -z "${DYNAMODB_ENDPOINT:-}" ]; then
  SHARED_DYNAMODB="$ROOT/target/test-servers/shared-dynamodb-local"
  scripts/dynamodb-local.sh start "$SHARED_DYNAMODB" >/dev/null
  trap 'scripts/dynamodb-local.sh stop "$SHARED_DYNAMODB"' EXIT
  trap 'exit 130' INT TERM
  DYNAMODB_ENDPOINT="$(cat "$SHARED_DYNAMODB/endpoint")"
  export DYNAMODB_ENDPOINT
  echo "run-tests: one DynamoDB Local for the test processes, on $DYNAMODB_ENDPOINT"
fi

LOGS="$ROOT/target/test-logs"
rm -rf "$LOGS"; mkdir -p "$LOGS"
declare -A started=() name_of=()
failed=()
summary=()

cpu_seconds() {  # $1: the output of `times`; its second line is the children's user and system time
  sed -n 2p "$1" 2>/dev/null | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] } printf "%.0f", t }'
}

finish() {  # $1: pid that ended, $2: its exit status
  local pid="$1" status="$2" name="${name_of[$1]}"
  local took=$(( $(date +%s) - started[$1] ))
  echo "──── $name: exit $status after ${took} s"
  cat "$LOGS/$name.log"
  summary+=("$(printf '%6s s  %6s s  %-28s %s' "$took" "$(cpu_seconds "$LOGS/$name.cpu")" "$name" \
    "$([ "$status" = 0 ] && echo ok || echo FAILED)")")
  [ "$status" = 0 ] || failed+=("$name")
  unset "name_of[$pid]"
}

wait_one() {
  local pid status=0
  wait -n -p pid "${!name_of[@]}" || status=$?
  finish "$pid" "$status"
}

for line in "${ordered[@]}"; do
  name="${line%%$'\t'*}"; exe="${line#*$'\t'}"
  while [ "${#name_of[@]}" -ge "$JOBS" ]; do wait_one; done
  # In a subshell whose `times` gives the CPU the binary and the servers it started used.
  read -ra args <<<"${args_of[$name]:-}"
  ( status=0; "$exe" "${args[@]}" >"$LOGS/$name.log" 2>&1 </dev/null || status=$?; times >"$LOGS/$name.cpu"; exit "$status" ) &
  started[$!]=$(date +%s); name_of[$!]="$name"
done
while [ "${#name_of[@]}" -gt 0 ]; do wait_one; done

echo; echo "Test jobs by time ($JOBS at a time): wall, CPU (with the servers each started), name"
printf '%s\n' "${summary[@]}" | sort -rn
if [ "${#failed[@]}" -gt 0 ]; then
  echo "FAILED: ${failed[*]} (logs in target/test-logs/)" >&2
  exit 1
fi
