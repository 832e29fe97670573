#!/usr/bin/env bash
# Keeps one service running, as docker-compose's `restart: unless-stopped` does:
#   deploy/supervise.sh <name> <run dir> <log file> <command...>
# Restarts the command whenever it exits, with backoff (1 s doubling to 30 s; back to 1 s
# after a run of 60 s or more), logs each exit with its code, counts restarts in
# <run dir>/<name>.restarts. The supervisor writes its own pid (<name>.supervisor.pid) and
# the service's (<name>.pid), so nobody has to look a pid up. SIGTERM/SIGINT: pass SIGTERM
# to the service, give it 15 s, SIGKILL it, exit without restarting.
set -uo pipefail
name=$1 run=$2 log=$3
shift 3
echo $$ >"$run/$name.supervisor.pid"
echo 0 >"$run/$name.restarts"
stopping=0 child="" delay=1 restarts=0

say() { echo "$(date -u '+%F %T') supervise $name: $*" >>"$log"; }
stop() {
  stopping=1
  [ -n "$child" ] && kill -TERM "$child" 2>/dev/null
}
trap stop TERM INT

while :; do
  say "starting $* (restarts so far: $restarts)"
  began=$SECONDS
  "$@" >>"$log" 2>&1 </dev/null &
  child=$!
  echo "$child" >"$run/$name.pid"
  # `wait` returns early when a trapped signal arrives; wait until the service has really exited
  while :; do
    wait "$child"; rc=$?
    kill -0 "$child" 2>/dev/null || break
    if ((stopping)); then
      for _ in $(seq 1 75); do kill -0 "$child" 2>/dev/null || break; sleep 0.2; done
      kill -KILL "$child" 2>/dev/null
      wait "$child"; rc=$?
      break
    fi
  done
  if ((stopping)); then
    say "stopped (exit code $rc)"
    break
  fi
  ((SECONDS - began >= 60)) && delay=1
  restarts=$((restarts + 1))
  echo "$restarts" >"$run/$name.restarts"
  reason="exit code $rc"; ((rc > 128)) && reason="$reason (signal $((rc - 128)))"
  say "exited with $reason after $((SECONDS - began)) s; restart $restarts in ${delay} s"
  sleep "$delay" &
  wait $! 2>/dev/null || kill $! 2>/dev/null
  ((stopping)) && { say "stopped while waiting to restart"; break; }
  delay=$((delay * 2 > 30 ? 30 : delay * 2))
done
rm -f "$run/$name.pid" "$run/$name.supervisor.pid"
