#!/usr/bin/env bash
# Starts or stops the Wakeline services (the four, and the checkpoint signer) as separate
# processes on the local stack:
#   deploy/services.sh up|down|status
# Each service runs under deploy/supervise.sh, which restarts it when it exits (with
# backoff, as docker-compose's `restart: unless-stopped`) and writes the pids itself:
#   .data/run/<service>.supervisor.pid, .data/run/<service>.pid, .data/run/<service>.restarts
# and the log to .data/logs/<service>.log. `down` stops only what these pid files name
# (supervisors first, so nothing is restarted, then the services): never another
# clone's processes, nor the test suite's own service processes.
set -euo pipefail
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${WAKELINE_ROOT:-$(cd "$SCRIPT_DIR/.." && pwd)}"
PY="$ROOT/.venv/bin/python"
RUN="${WAKELINE_RUN_DIR:-$ROOT/.data/run}"
LOGS="${WAKELINE_LOG_DIR:-$ROOT/.data/logs}"
READY_TIMEOUT="${WAKELINE_READY_TIMEOUT:-60}"
SERVICES=(archiver runner brain gateway signer)
# What each service logs once it is consuming; the gateway is ready when /healthz answers.
declare -A READY=([archiver]='archiver .*started' [runner]='runner .*(consuming|started)' [brain]='brain .*started'
                  [signer]='signer.*started')
# Each runs its console script `wakeline-<service>` (so that is what its command line holds);
# the signer's takes a sub-command (run: every tenant that has events, on schedule).
declare -A ARGS=([signer]=run)
mkdir -p "$RUN" "$LOGS"

# The pid in $RUN/<file> if that process is alive and its command line has <what> in it
# (a pid file left by a dead process may name an unrelated process now).
pid_of() {
  local file="$RUN/$1" what=$2 pid
  [ -f "$file" ] || return 1
  pid=$(cat "$file" 2>/dev/null) && [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "$what" || return 1
  echo "$pid"
}
supervisor() { pid_of "$1.supervisor.pid" "supervise.sh $1 "; }
service() { pid_of "$1.pid" "wakeline-$1"; }

# Readiness: the line that marks readiness, logged after this start's "supervise ... starting" line.
ready() {
  local s=$1
  if [ "$s" = gateway ]; then
    curl -fsS "http://127.0.0.1:${WAKELINE_HTTP_PORT:-18080}/healthz" >/dev/null 2>&1
  else
    # The whole log is read (no `tac | grep -m1`): under pipefail that pipeline fails with
    # SIGPIPE once the log outgrows a pipe buffer, and readiness was then never seen.
    local last
    last=$(grep -E "supervise $s: starting|${READY[$s]}" "$LOGS/$s.log" 2>/dev/null | tail -n 1) || return 1
    [[ "$last" =~ ${READY[$s]} ]]
  fi
}

start_one() {
  local s=$1
  if supervisor "$s" >/dev/null; then echo "$s: already supervised (pid $(service "$s" || echo '-'))"; return 0; fi
  rm -f "$RUN/$s.supervisor.pid" "$RUN/$s.pid"
  # setsid without --fork execs in place (a background job of this non-interactive shell is
  # not a group leader), so $! is the supervisor itself: its pid is known at once, never
  # looked up. It outlives this shell and writes its own pid file and its service's.
  (cd "$ROOT" && exec setsid "$SCRIPT_DIR/supervise.sh" "$s" "$RUN" "$LOGS/$s.log" "$ROOT/.venv/bin/wakeline-$s" ${ARGS[$s]:-} \
     </dev/null >/dev/null 2>&1) &
  STARTED[$s]=$!
}

# Each service is waited for until it is ready (its own readiness, not only the gateway's),
# however long the machine takes to start it, up to READY_TIMEOUT; a supervisor that died
# meanwhile fails `up` at once.
declare -A STARTED=()
up() {
  for s in "${SERVICES[@]}"; do start_one "$s"; done
  local deadline=$((SECONDS + READY_TIMEOUT)) waiting=("${SERVICES[@]}") left
  while ((${#waiting[@]})); do
    left=()
    for s in "${waiting[@]}"; do
      if [ -n "${STARTED[$s]:-}" ] && ! kill -0 "${STARTED[$s]}" 2>/dev/null; then
        echo "$s: its supervisor (pid ${STARTED[$s]}) exited; last lines of $LOGS/$s.log:" >&2
        tail -20 "$LOGS/$s.log" >&2 || true
        exit 1
      fi
      if service "$s" >/dev/null && ready "$s"; then
        echo "$s: ready (pid $(service "$s"), restarts $(cat "$RUN/$s.restarts"), log $LOGS/$s.log)"
      else
        left+=("$s")
      fi
    done
    waiting=("${left[@]}")
    ((${#waiting[@]})) || break
    if ((SECONDS >= deadline)); then
      for s in "${waiting[@]}"; do
        echo "$s: not ready within ${READY_TIMEOUT} s (restarts $(cat "$RUN/$s.restarts" 2>/dev/null || echo ?)); last lines of $LOGS/$s.log:" >&2
        tail -20 "$LOGS/$s.log" >&2
      done
      exit 1
    fi
    sleep 0.3
  done
}

# SIGTERM, up to 15 s, then SIGKILL.
terminate() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 75); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
}

down() {
  local s pid
  # Supervisors first, all at once: each passes SIGTERM to its service and does not restart it.
  for s in "${SERVICES[@]}"; do
    if pid=$(supervisor "$s"); then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for s in "${SERVICES[@]}"; do
    if pid=$(supervisor "$s"); then terminate "$pid"; fi
    # A service whose supervisor is gone (killed, or an older services.sh) is stopped by its pid file.
    if pid=$(service "$s"); then terminate "$pid"; echo "$s: stopped"; else echo "$s: stopped"; fi
    rm -f "$RUN/$s.pid" "$RUN/$s.supervisor.pid"
  done
}

status() {
  local s spid pid
  for s in "${SERVICES[@]}"; do
    spid=$(supervisor "$s" || true) pid=$(service "$s" || true)
    restarts=$(cat "$RUN/$s.restarts" 2>/dev/null || echo 0)
    if [ -n "$pid" ] && [ -n "$spid" ]; then
      echo "$s: running (pid $pid, supervisor $spid, restarts $restarts, log $LOGS/$s.log)"
    elif [ -n "$spid" ]; then
      echo "$s: restarting (supervisor $spid, restarts $restarts, log $LOGS/$s.log)"
    elif [ -n "$pid" ]; then
      echo "$s: running unsupervised (pid $pid, log $LOGS/$s.log)"
    else
      echo "$s: stopped (restarts $restarts)"
    fi
  done
}

case "${1:-}" in
  up) up ;; down) down ;; status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
