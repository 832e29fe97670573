#!/usr/bin/env bash
# Wakeline local Kafka: a real Apache Kafka broker (KRaft, one combined
# broker+controller node) run as a plain JVM process. Jars come from Maven
# Central via deploy/kafka/pom.xml; no Docker, no tarball download.
#
# Usage: kafka.sh up|down|restart|status|logs
#
# Environment (all optional):
#   WAKELINE_ROOT                   repo root          (default: two dirs above this script)
#   WAKELINE_KAFKA_PORT             client port        (default 19092)
#   WAKELINE_KAFKA_CONTROLLER_PORT  KRaft quorum port  (default 19093)
#   WAKELINE_KAFKA_DATA             data dir           (default $WAKELINE_ROOT/.data/kafka)
#   WAKELINE_KAFKA_HEAP             JVM heap flags     (default "-Xmx512m -Xms256m")
#   WAKELINE_KAFKA_START_TIMEOUT    seconds to wait for the broker (default 90)
#   WAKELINE_CACHE                  jar cache          (default $WAKELINE_ROOT/.cache)
#   WAKELINE_CREDENTIALS_FILE       passwords          (default $WAKELINE_ROOT/.data/credentials.env)
#   WAKELINE_KAFKA_NODE_ID          KRaft node id      (default 1)
#   WAKELINE_KAFKA_VOTERS           controller.quorum.voters (default this node alone)
#   WAKELINE_KAFKA_REPLICATION      internal topics' replication factor (default 1)
#   WAKELINE_KAFKA_MIN_ISR          their min.insync.replicas (default 1)
#   WAKELINE_KAFKA_CLUSTER_ID       cluster id written at format (default the single node's)
# cluster.sh sets the last five for each node of the three-node cluster.
#
# Clients authenticate with SASL/SCRAM-SHA-512 as one of the principals in
# deploy/credentials.sh (passwords generated once into the credentials file); the
# users are added when the storage is formatted. A data dir formatted before that
# (a PLAINTEXT broker), or whose users have other passwords than the file now holds, is
# brought in line on `up`: started PLAINTEXT, the users upserted through the Admin API,
# then restarted with SASL ($DATA/scram-users holds a hash of the passwords it has).
# ACLs are the job of `python -m wakeline.ops.admin acls` (make up runs it).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${WAKELINE_ROOT:-$(cd "$SCRIPT_DIR/../.." && pwd)}"
PORT="${WAKELINE_KAFKA_PORT:-19092}"
CONTROLLER_PORT="${WAKELINE_KAFKA_CONTROLLER_PORT:-19093}"
# Absolute (realpath -m: need not exist yet): the data path is part of the JVM
# command line we match on, so it must read the same from any working directory.
DATA="$(realpath -m "${WAKELINE_KAFKA_DATA:-$ROOT/.data/kafka}")"
HEAP="${WAKELINE_KAFKA_HEAP:--Xmx512m -Xms256m}"
START_TIMEOUT="${WAKELINE_KAFKA_START_TIMEOUT:-90}"
NODE_ID="${WAKELINE_KAFKA_NODE_ID:-1}"
VOTERS="${WAKELINE_KAFKA_VOTERS:-$NODE_ID@127.0.0.1:$CONTROLLER_PORT}"
REPLICATION="${WAKELINE_KAFKA_REPLICATION:-1}"
MIN_ISR="${WAKELINE_KAFKA_MIN_ISR:-1}"
CACHE="$(realpath -m "${WAKELINE_CACHE:-$ROOT/.cache}")"

POM="$SCRIPT_DIR/pom.xml"
TEMPLATE="$SCRIPT_DIR/server.properties.template"
LOG4J_CONF="$SCRIPT_DIR/log4j2.properties"
# The version is pinned in the POM only; read it from there so there's one source of truth.
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | head -n1)"
LIBS="$CACHE/kafka-libs/$KAFKA_VERSION"

PROPS="$DATA/server.properties"
LOG_DIRS="$DATA/kraft-combined-logs"   # Kafka's log.dirs (records + KRaft metadata log)
PID_FILE="$DATA/kafka.pid"
LOCK_FILE="$DATA/kafka.lock"
LOG_FILE="$DATA/server.log"            # broker stdout/stderr (log4j2 -> console)
# Fixed cluster id: base64url of the 16 bytes "wakeline-kafka-1". It is only
# used by the one-time format and then lives on in meta.properties.
CLUSTER_ID="${WAKELINE_KAFKA_CLUSTER_ID:-d2FrZWxpbmUta2Fma2EtMQ}"
CREDENTIALS="$SCRIPT_DIR/../credentials.sh"
PRINCIPALS=(admin brain runner archiver gateway)  # as in credentials.sh, but signer (it is admin here)
SCRAM_MARKER="$DATA/scram-users"                  # sha256 of the passwords its users have

if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA="java"; fi

log() { echo "kafka.sh: $*"; }
die() { echo "kafka.sh: ERROR: $*" >&2; exit 1; }

# ---------------------------------------------------------------- helpers

# pgrep pattern for our broker's command line: "... kafka.Kafka <PROPS>" at the
# end, with the path regex-escaped. Matching on the properties path means a
# broker of another checkout/data dir is never touched.
PROPS_RE="kafka\\.Kafka $(printf '%s' "$PROPS" | sed 's/[][\\.*^$+?(){}|]/\\&/g')\$"
our_pids() { pgrep -f "$PROPS_RE" || true; }

# Alive and not a zombie (an un-reaped dead JVM still answers kill -0).
alive() {
  [[ -r "/proc/$1/stat" ]] || return 1
  [[ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != "Z" ]]
}

# PID of our broker (the one using $PROPS), or nothing. Pid file first, then a
# cmdline scan so a lost/stale pid file never leaves an orphan broker behind.
broker_pid() {
  local pid
  if [[ -f "$PID_FILE" ]]; then
    pid="$(cat "$PID_FILE" 2>/dev/null || true)"
    if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $PROPS"; then
      echo "$pid"; return 0
    fi
  fi
  our_pids | head -n1
}

# True if something accepts TCP connections on 127.0.0.1:$1 (bash built-in, no tools needed).
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

print_log_tail() {
  if [[ -f "$LOG_FILE" ]]; then
    echo "----- last 40 lines of $LOG_FILE -----" >&2
    tail -n 40 "$LOG_FILE" >&2
    echo "--------------------------------------" >&2
  fi
}

# The broker is "ready" when its port is open and it logged that it started - since
# the last `up` marker, because the log is appended across restarts. (A kcat metadata
# round trip was the check while the listener was PLAINTEXT; the Debian kcat's
# SCRAM-SHA-512 login is refused by this broker while the Java and aiokafka clients
# log in, so the log decides.)
broker_ready() { port_open "$PORT" && started_since '===== kafka.sh up'; }

# Did the broker log that it started after the last line starting with $1? (Not tac |
# grep -m1: under pipefail tac's SIGPIPE on a long log fails the pipeline.)
started_since() {
  [[ "$(grep -E "^$1|Kafka Server started" "$LOG_FILE" 2>/dev/null | tail -n1)" == *"Kafka Server started"* ]]
}

wait_ready() {
  local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if broker_ready; then return 0; fi
    if ! alive "$pid"; then
      print_log_tail
      die "the Kafka JVM (pid $pid) exited during startup; see $LOG_FILE"
    fi
    sleep 0.5
  done
  print_log_tail
  die "broker did not answer a metadata request on 127.0.0.1:$PORT within ${START_TIMEOUT}s" \
      "(port + log check failed); it is still running as pid $pid, log: $LOG_FILE"
}

check_java() {
  command -v "$JAVA" >/dev/null 2>&1 || die "'java' not found on PATH (Kafka $KAFKA_VERSION needs a Java 17+ runtime; e.g. apt-get install openjdk-17-jre-headless)"
  local v
  v="$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
  if [[ -n "$v" && "$v" -lt 17 ]]; then
    die "Kafka $KAFKA_VERSION needs Java 17+, but '$JAVA' is Java $v"
  fi
}

# Resolve the broker jars into $LIBS once. A marker holding the POM's hash makes
# re-runs free, and editing the POM (e.g. another dependency) re-resolves.
resolve_jars() {
  [[ -n "$KAFKA_VERSION" ]] || die "could not read <kafka.version> from $POM"
  local want
  want="$(sha256sum "$POM" | cut -d' ' -f1)"
  if [[ "$(cat "$LIBS/.resolved" 2>/dev/null)" == "$want" ]]; then return 0; fi

  command -v mvn >/dev/null 2>&1 || die "'mvn' not found; Maven is needed once to fetch the Kafka jars (apt-get install maven)"
  log "resolving Kafka $KAFKA_VERSION jars from Maven Central into $LIBS (one-time) ..."
  # Resolve into a scratch dir and swap it in only when complete: a failed or
  # interrupted run never leaves a half-filled $LIBS behind.
  local out rc=0 tmp="$LIBS.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$CACHE"
  # -B: no colour codes in the error tail. Fully qualified goal: no plugin-prefix
  # lookup (pinned version, one fewer download). Absolute paths: Maven resolves
  # relative ones against the POM's directory, not the caller's.
  out="$(mvn -B -q -f "$POM" -Dmaven.repo.local="$CACHE/m2" \
         org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
         -DoutputDirectory="$tmp" 2>&1)" || rc=$?
  if ((rc != 0)) || [[ ! -f "$tmp/kafka_2.13-$KAFKA_VERSION.jar" ]]; then
    rm -rf "$tmp"
    echo "$out" | tail -n 25 >&2
    if echo "$out" | grep -qiE 'transfer|resolv|unknown ?host|connect|timed out|network|offline|no plugin found'; then
      die "Maven could not reach Maven Central to download Kafka $KAFKA_VERSION (see mvn output above)"
    fi
    die "Maven failed to resolve the Kafka $KAFKA_VERSION jars (exit $rc, see mvn output above)"
  fi
  echo "$want" >"$tmp/.resolved"
  rm -rf "$LIBS"
  # -T: if a concurrent `up` (other data dir, same cache) swapped first, fail
  # instead of nesting our dir inside its; its result is as good as ours.
  mv -T "$tmp" "$LIBS" 2>/dev/null || rm -rf "$tmp"
  [[ "$(cat "$LIBS/.resolved" 2>/dev/null)" == "$want" ]] || die "jar cache $LIBS is incomplete after resolving"
}

password_of() { bash "$CREDENTIALS" get "WAKELINE_KAFKA_PASSWORDS__$(tr a-z A-Z <<<"$1")"; }

# What the users' passwords are now, as one hash: the marker says whether the broker has them.
scram_fingerprint() {
  local p
  for p in "${PRINCIPALS[@]}"; do echo "$p=$(password_of "$p")"; done | sha256sum | cut -d' ' -f1
}
scram_current() { [[ "$(cat "$SCRAM_MARKER" 2>/dev/null)" == "$(scram_fingerprint)" ]]; }

render_props() {
  # Escape sed replacement specials in the path (\, &, and our | delimiter).
  local dirs admin plain="" p
  dirs="$(printf '%s' "$LOG_DIRS" | sed 's/[\\&|]/\\&/g')"
  admin="$(password_of admin)"  # hex: nothing to escape
  for p in "${PRINCIPALS[@]}"; do plain+="user_$p=\"$(password_of "$p")\" "; done
  # 0600: the properties hold the admin password.
  (umask 077; sed -e "s|@PORT@|$PORT|g" -e "s|@CONTROLLER_PORT@|$CONTROLLER_PORT|g" -e "s|@LOG_DIRS@|$dirs|g" \
                   -e "s|@NODE_ID@|$NODE_ID|g" -e "s|@VOTERS@|$VOTERS|g" \
                   -e "s|@REPLICATION@|$REPLICATION|g" -e "s|@MIN_ISR@|$MIN_ISR|g" \
                   -e "s|@ADMIN_PASSWORD@|$admin|g" -e "s|@PLAIN_USERS@|${plain% }|g" "$TEMPLATE" >"$PROPS.tmp")
  mv "$PROPS.tmp" "$PROPS"
}

# JVM flags. The heap is split into words on purpose ("-Xmx512m -Xms256m").
read -r -a HEAP_OPTS <<<"$HEAP"
# Kafka's own defaults from kafka-run-class.sh (G1 with short pauses).
GC_OPTS=(-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
         -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true)
BASE_OPTS=(-Dlog4j2.configurationFile="$LOG4J_CONF" -cp "$LIBS/*")

# Format storage exactly once: meta.properties marks an already formatted log dir,
# and re-formatting would be refused anyway (and must never wipe data).
format_once() {
  [[ -f "$LOG_DIRS/meta.properties" ]] && return 0
  log "formatting KRaft storage in $LOG_DIRS (cluster id $CLUSTER_ID, SCRAM users ${PRINCIPALS[*]}) ..."
  local out p scram=()
  for p in "${PRINCIPALS[@]}"; do
    scram+=(--add-scram "SCRAM-SHA-512=[name=$p,password=$(password_of "$p")]")
  done
  if ! out="$("$JAVA" -Xmx256m "${BASE_OPTS[@]}" kafka.tools.StorageTool format \
              -t "$CLUSTER_ID" -c "$PROPS" "${scram[@]}" 2>&1)"; then
    echo "$out" | tail -n 25 >&2
    die "kafka.tools.StorageTool format failed for $LOG_DIRS"
  fi
  scram_fingerprint >"$SCRAM_MARKER"
}

# A data dir formatted before credentials existed has no SCRAM users, and a SASL broker
# on it would let nobody in; one whose users have older passwords (the credentials file
# was replaced) would refuse the services and its own inter-broker login. Then, once:
# start it PLAINTEXT on loopback, upsert the users through the Admin API
# (deploy/kafka/ScramUsers.java, run from source: needs a JDK), stop it.
migrate_to_scram() {
  scram_current && return 0
  if [[ -f "$SCRAM_MARKER" ]]; then
    log "$DATA has SCRAM users with other passwords than $(bash "$CREDENTIALS" path); setting them ..."
  else
    log "$DATA was formatted without SCRAM users (a PLAINTEXT broker); adding them once ..."
  fi
  "$JAVA" --list-modules 2>/dev/null | grep -q '^jdk.compiler' ||
    die "migrating $DATA needs a JDK (java runs ScramUsers.java from source); install openjdk-17-jdk-headless, or remove $DATA to start over (un-archived events are lost)"
  local plain="$DATA/plaintext-migration.properties" pid out p
  grep -v -E '^(listeners|advertised\.listeners|listener\.|inter\.broker\.listener\.name|sasl\.|authorizer\.|super\.users|allow\.everyone)' \
       "$PROPS" >"$plain"
  printf '%s\n' "listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT" \
      "advertised.listeners=PLAINTEXT://127.0.0.1:$PORT" \
      "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT" \
      "inter.broker.listener.name=PLAINTEXT" >>"$plain"
  echo "===== kafka.sh migrate-to-scram $(date -u +%FT%TZ) =====" >>"$LOG_FILE"
  setsid nohup "$JAVA" "${HEAP_OPTS[@]}" "${GC_OPTS[@]}" "${BASE_OPTS[@]}" kafka.Kafka "$plain" \
    >>"$LOG_FILE" 2>&1 </dev/null 9>&- &
  pid=$!
  local deadline=$((SECONDS + START_TIMEOUT)) rc=0
  until port_open "$PORT" && started_since '===== kafka.sh migrate-to-scram'; do
    alive "$pid" && ((SECONDS < deadline)) || { print_log_tail; kill -KILL "$pid" 2>/dev/null; die "the PLAINTEXT broker did not start for the migration"; }
    sleep 0.5
  done
  # Passwords on stdin, never on a command line.
  out="$(for p in "${PRINCIPALS[@]}"; do echo "$p=$(password_of "$p")"; done |
         "$JAVA" -cp "$LIBS/*" "$SCRIPT_DIR/ScramUsers.java" "127.0.0.1:$PORT" 2>&1)" || rc=$?
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 30))
  while alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
  alive "$pid" && kill -KILL "$pid" 2>/dev/null
  ((rc == 0)) || { echo "$out" | tail -n 20 >&2; die "adding the SCRAM users to $DATA failed"; }
  rm -f "$plain"
  scram_fingerprint >"$SCRAM_MARKER"
  log "SCRAM users added; the broker now starts with SASL"
}

# ---------------------------------------------------------------- commands

cmd_up() {
  local pid
  bash "$CREDENTIALS" ensure
  pid="$(broker_pid)"
  if [[ -n "$pid" ]]; then
    # Idempotent: ours is already up. Still make sure it answers before returning.
    scram_current ||
      die "the broker running on $DATA (pid $pid) lacks the SCRAM users of $(bash "$CREDENTIALS" path) (it predates credentials, or the file changed); run \`kafka.sh restart\` (or make down && make up) and they are set"
    wait_ready "$pid"
    log "already running (pid $pid) on 127.0.0.1:$PORT"
    return 0
  fi

  check_java
  resolve_jars

  # Someone else on our ports would make the readiness check lie (or the JVM die).
  local p
  for p in "$PORT" "$CONTROLLER_PORT"; do
    if port_open "$p"; then
      die "port 127.0.0.1:$p is already in use by another process (not this broker); set WAKELINE_KAFKA_PORT / WAKELINE_KAFKA_CONTROLLER_PORT"
    fi
  done

  mkdir -p "$DATA" "$LOG_DIRS"
  render_props
  format_once
  migrate_to_scram

  log "starting Kafka $KAFKA_VERSION on 127.0.0.1:$PORT (data: $DATA)"
  echo "===== kafka.sh up $(date -u +%FT%TZ) =====" >>"$LOG_FILE"
  # setsid: own session, so the broker outlives the calling shell/CI step and
  # isn't hit by its Ctrl-C. bash execs straight into java, so $! is the JVM.
  # 9>&-: the JVM must not inherit (and so hold forever) the up/down lock.
  setsid nohup "$JAVA" "${HEAP_OPTS[@]}" "${GC_OPTS[@]}" "${BASE_OPTS[@]}" kafka.Kafka "$PROPS" \
    >>"$LOG_FILE" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"

  local t0=$SECONDS
  wait_ready "$pid"
  log "ready after $((SECONDS - t0))s (pid $pid, log $LOG_FILE)"
}

cmd_down() {
  local pid
  pid="$(broker_pid)"
  if [[ -z "$pid" ]]; then
    rm -f "$PID_FILE"
    log "not running"
    return 0
  fi
  log "stopping broker (pid $pid) ..."
  kill -TERM "$pid" 2>/dev/null || true
  # A clean shutdown flushes logs and skips recovery on the next start; usually a few seconds.
  local deadline=$((SECONDS + 30))
  while alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
  if alive "$pid"; then
    log "still alive after 30s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # Belt and braces: nothing of ours may survive `down` (also catches a second
  # broker on the same data dir started behind the pid file's back).
  local left
  deadline=$((SECONDS + 10))
  while left="$(our_pids)"; [[ -n "$left" ]] && ((SECONDS < deadline)); do
    # pgrep also lists zombies; drop those, they are already dead.
    local p live=""
    for p in $left; do alive "$p" && live+=" $p"; done
    [[ -z "$live" ]] && break
    kill -KILL $live 2>/dev/null || true
    sleep 0.2
  done
  for p in $(our_pids); do
    if alive "$p"; then die "broker process $p for $PROPS is still alive"; fi
  done
  rm -f "$PID_FILE"
  log "stopped"
}

cmd_status() {
  local pid
  pid="$(broker_pid)"
  if [[ -z "$pid" ]]; then
    echo "stopped (data: $DATA)"
    return 3
  fi
  if broker_ready; then
    echo "running: pid $pid, kafka $KAFKA_VERSION, 127.0.0.1:$PORT, data $DATA, log $LOG_FILE"
  else
    echo "starting/unhealthy: pid $pid is alive but 127.0.0.1:$PORT does not answer metadata; log $LOG_FILE"
    return 4
  fi
}

# Serialise up/down on one data dir, so two concurrent `up`s can't start two
# JVMs (the loser would die on the port and clobber the pid file).
lock() {
  mkdir -p "$DATA"
  exec 9>"$LOCK_FILE"
  flock -w 120 9 || die "another kafka.sh is busy with $DATA (lock $LOCK_FILE held for 120s)"
}

case "${1:-}" in
  up) lock; cmd_up ;;
  down) lock; cmd_down ;;
  restart) lock; cmd_down; cmd_up ;;
  status) cmd_status ;;
  logs) echo "$LOG_FILE" ;;
  *)
    echo "usage: $0 up|down|restart|status|logs" >&2
    exit 2
    ;;
esac
