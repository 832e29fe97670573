#!/usr/bin/env bash
# Starts or stops the four Wakeline services as separate processes on the local stack:
#   deploy/services.sh up|down|status
# Each writes its log to .data/logs/<service>.log and its pid to .data/run/<service>.pid.
set -euo pipefail
ROOT="${WAKELINE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
PY="$ROOT/.venv/bin/python"
RUN="$ROOT/.data/run"
LOGS="$ROOT/.data/logs"
SERVICES=(archiver runner brain gateway)
mkdir -p "$RUN" "$LOGS"

alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

up() {
  for s in "${SERVICES[@]}"; do
    if alive "$s"; then echo "$s: already running (pid $(cat "$RUN/$s.pid"))"; continue; fi
    (cd "$ROOT" && exec setsid --fork "$PY" -m "wakeline_$s" >>"$LOGS/$s.log" 2>&1 </dev/null)
    pgrep -n -f "^$PY -m wakeline_$s\$" >"$RUN/$s.pid"
    echo "$s: started (pid $(cat "$RUN/$s.pid"), log $LOGS/$s.log)"
  done
  # The gateway answering is the sign the others had time to join their groups too.
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:${WAKELINE_HTTP_PORT:-18080}/healthz" >/dev/null 2>&1 && return 0
    for s in "${SERVICES[@]}"; do
      alive "$s" || { echo "$s exited; last lines of $LOGS/$s.log:" >&2; tail -20 "$LOGS/$s.log" >&2; exit 1; }
    done
    sleep 0.2
  done
  echo "gateway did not answer on /healthz within 20 s; see $LOGS/gateway.log" >&2
  exit 1
}

down() {
  for s in "${SERVICES[@]}"; do
    if alive "$s"; then
      pid=$(cat "$RUN/$s.pid")
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -KILL "$pid" 2>/dev/null || true
      echo "$s: stopped"
    fi
    rm -f "$RUN/$s.pid"
    # setsid may fork, so the pid file can name a parent: also stop this clone's service by name
    pkill -TERM -f "^$PY -m wakeline_$s\$" 2>/dev/null || true
  done
  sleep 0.5
  for s in "${SERVICES[@]}"; do pkill -KILL -f "^$PY -m wakeline_$s\$" 2>/dev/null || true; done
}

status() {
  for s in "${SERVICES[@]}"; do
    if alive "$s"; then echo "$s: running (pid $(cat "$RUN/$s.pid"), log $LOGS/$s.log)"; else echo "$s: stopped"; fi
  done
}

case "${1:-}" in
  up) up ;; down) down ;; status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
