#!/usr/bin/env bash
# Start and stop moto's server mode (PyPI `moto[server]`, installed into .venv by `make tools`):
# local SQS, EventBridge, Firehose and S3 for the demo. The tests start their own
# (tests/support/moto.rs).
#
#   scripts/moto.sh start STATEDIR   # free port on 127.0.0.1; writes STATEDIR/{pid,port,endpoint}
#   scripts/moto.sh stop STATEDIR    # stops the server by the PID it recorded
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOTO_SERVER="${MOTO_SERVER:-$ROOT/.venv/bin/moto_server}"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start() {
  local state="$1"
  [ -x "$MOTO_SERVER" ] || { echo "moto: $MOTO_SERVER not found: run \`make tools\`" >&2; exit 1; }
  mkdir -p "$state"
  local port; port="$(free_port)"
  # -H 127.0.0.1: reachable from this machine only.
  "$MOTO_SERVER" -H 127.0.0.1 -p "$port" >"$state/server.log" 2>&1 &
  echo $! >"$state/pid"
  echo "$port" >"$state/port"
  echo "http://127.0.0.1:$port" >"$state/endpoint"
  for _ in $(seq 1 120); do
    if ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
      echo "moto: server exited during start-up:" >&2; cat "$state/server.log" >&2; exit 1
    fi
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=1)' \
        "http://127.0.0.1:$port" 2>/dev/null; then
      echo "moto: listening on http://127.0.0.1:$port (pid $(cat "$state/pid"))" >&2
      return 0
    fi
    sleep 0.25
  done
  echo "moto: not ready after 30 s" >&2; stop "$state"; exit 1
}

stop() {
  local state="$1"
  [ -f "$state/pid" ] || return 0
  local pid; pid="$(cat "$state/pid")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$state/pid"
}

case "${1:-}" in
  start) start "${2:?state dir}" ;;
  stop) stop "${2:?state dir}" ;;
  *) echo "usage: $0 start STATEDIR | stop STATEDIR" >&2; exit 2 ;;
esac
