# Sourced by scripts/dynamodb-local.sh and scripts/moto.sh: run a local server in the background
# on a free port of 127.0.0.1, record STATEDIR/{pid,port,endpoint}, wait until it answers; stop
# it by the PID it recorded.

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# server_start NAME STATEDIR PORT TRIES PROBE COMMAND...
#   Starts COMMAND (output to STATEDIR/server.log), then runs `PROBE PORT` every 0.5 s, at most
#   TRIES times, until it succeeds.
server_start() {
  local name="$1" state="$2" port="$3" tries="$4" probe="$5"
  shift 5
  mkdir -p "$state"
  "$@" >"$state/server.log" 2>&1 &
  echo $! >"$state/pid"
  echo "$port" >"$state/port"
  echo "http://127.0.0.1:$port" >"$state/endpoint"
  for _ in $(seq 1 "$tries"); do
    if ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
      echo "$name: server exited during start-up:" >&2; cat "$state/server.log" >&2; exit 1
    fi
    if "$probe" "$port" 2>/dev/null; then
      echo "$name: listening on http://127.0.0.1:$port (pid $(cat "$state/pid"))" >&2
      return 0
    fi
    sleep 0.5
  done
  echo "$name: not ready after $((tries / 2)) s" >&2; server_stop "$state"; exit 1
}

# server_stop STATEDIR: SIGTERM, then SIGKILL after 5 s.
server_stop() {
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
