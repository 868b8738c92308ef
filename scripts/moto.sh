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

# shellcheck source=scripts/local-server.sh
. "$ROOT/scripts/local-server.sh"

answers() {
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=1)' \
    "http://127.0.0.1:$1"
}

start() {
  [ -x "$MOTO_SERVER" ] || { echo "moto: $MOTO_SERVER not found: run \`make tools\`" >&2; exit 1; }
  local port; port="$(free_port)"
  # -H 127.0.0.1: reachable from this machine only.
  server_start moto "$1" "$port" 60 answers "$MOTO_SERVER" -H 127.0.0.1 -p "$port"
}

case "${1:-}" in
  start) start "${2:?state dir}" ;;
  stop) server_stop "${2:?state dir}" ;;
  *) echo "usage: $0 start STATEDIR | stop STATEDIR" >&2; exit 2 ;;
esac
