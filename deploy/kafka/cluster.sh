#!/usr/bin/env bash
# Wakeline's three-broker Kafka cluster on one machine: three KRaft nodes, each a combined
# broker + controller, started by kafka.sh from the same Maven jars as the single broker.
#
# Usage: cluster.sh up|down|status|env|bootstrap
#        cluster.sh kill N     kill -9 node N (1..3), as a crash would
#        cluster.sh start N    start node N again (the others keep running)
#        cluster.sh stop N     stop node N cleanly
#
# Why combined nodes: three controllers are what a quorum that survives one loss needs, and
# a separate controller quorum would be three more JVMs on a 2-core machine. The price is
# that a node's crash takes a broker and a voter at once; with one node down the other two
# still hold the quorum (2 of 3) and every partition's in-sync minimum (2), so writes go on;
# with two down there is neither, and `acks=all` writes are refused until one returns.
#
# Topics on the cluster are created with replication factor 3 and min.insync.replicas 2
# (`cluster.sh env` prints the settings that say so; `make cluster-up` creates them).
#
# Environment (all optional):
#   WAKELINE_ROOT               repo root (default: two dirs above this script)
#   WAKELINE_CLUSTER_BASE_PORT  node N listens on BASE+10(N-1), its controller on that +1 (default 19192)
#   WAKELINE_CLUSTER_DATA       data dir of the three nodes (default $WAKELINE_ROOT/.data/kafka-cluster)
#   WAKELINE_CLUSTER_HEAP       JVM heap flags per node (default "-Xmx384m -Xms128m")
#   and kafka.sh's own: WAKELINE_CACHE, WAKELINE_CREDENTIALS_FILE, WAKELINE_KAFKA_START_TIMEOUT
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${WAKELINE_ROOT:-$(cd "$SCRIPT_DIR/../.." && pwd)}"
BASE="${WAKELINE_CLUSTER_BASE_PORT:-19192}"
DATA_ROOT="$(realpath -m "${WAKELINE_CLUSTER_DATA:-$ROOT/.data/kafka-cluster}")"
HEAP="${WAKELINE_CLUSTER_HEAP:--Xmx384m -Xms128m}"
NODES=(1 2 3)
# base64url of the 16 bytes "wakeline-cluster" (the single broker has its own id).
CLUSTER_ID="d2FrZWxpbmUtY2x1c3Rlcg"

log() { echo "cluster.sh: $*"; }
die() { echo "cluster.sh: ERROR: $*" >&2; exit 1; }

port_of() { echo $((BASE + 10 * ($1 - 1))); }
controller_port_of() { echo $((BASE + 10 * ($1 - 1) + 1)); }
data_of() { echo "$DATA_ROOT/node-$1"; }

voters() {
  local n out=""
  for n in "${NODES[@]}"; do out+="$n@127.0.0.1:$(controller_port_of "$n"),"; done
  echo "${out%,}"
}

bootstrap() {
  local n out=""
  for n in "${NODES[@]}"; do out+="127.0.0.1:$(port_of "$n"),"; done
  echo "${out%,}"
}

# kafka.sh for node $1, with the rest of the arguments.
node() {
  local n="$1"; shift
  [[ "$n" =~ ^[123]$ ]] || die "no node '$n' (nodes are 1, 2, 3)"
  WAKELINE_ROOT="$ROOT" WAKELINE_KAFKA_NODE_ID="$n" WAKELINE_KAFKA_VOTERS="$(voters)" \
  WAKELINE_KAFKA_PORT="$(port_of "$n")" WAKELINE_KAFKA_CONTROLLER_PORT="$(controller_port_of "$n")" \
  WAKELINE_KAFKA_DATA="$(data_of "$n")" WAKELINE_KAFKA_REPLICATION=3 WAKELINE_KAFKA_MIN_ISR=2 \
  WAKELINE_KAFKA_CLUSTER_ID="$CLUSTER_ID" WAKELINE_KAFKA_HEAP="$HEAP" \
    bash "$SCRIPT_DIR/kafka.sh" "$@"
}

pid_of() { cat "$(data_of "$1")/kafka.pid" 2>/dev/null || true; }

cmd_up() {
  # Together: no node reports started before a majority of the voters has formed a quorum.
  # Each node's words go to a file, not a pipe: the broker JVM would inherit the pipe and
  # hold it open for its whole life.
  local n pids=() failed=0
  mkdir -p "$DATA_ROOT"
  for n in "${NODES[@]}"; do
    node "$n" up >"$DATA_ROOT/node-$n.up.log" 2>&1 &
    pids+=($!)
  done
  for n in "${!pids[@]}"; do wait "${pids[$n]}" || failed=1; done
  for n in "${NODES[@]}"; do sed "s/^/node $n: /" "$DATA_ROOT/node-$n.up.log"; done
  ((failed == 0)) || die "a node did not start; logs: $DATA_ROOT/node-*/server.log"
  log "three nodes up; bootstrap $(bootstrap)"
}

cmd_down() {
  # Together: stopped one by one, the last node would wait for a quorum that is gone.
  local n pids=() failed=0
  mkdir -p "$DATA_ROOT"
  for n in "${NODES[@]}"; do
    node "$n" down >"$DATA_ROOT/node-$n.down.log" 2>&1 &
    pids+=($!)
  done
  for n in "${!pids[@]}"; do wait "${pids[$n]}" || failed=1; done
  for n in "${NODES[@]}"; do sed "s/^/node $n: /" "$DATA_ROOT/node-$n.down.log"; done
  ((failed == 0)) || die "a node did not stop"
}

cmd_status() {
  local n rc=0
  for n in "${NODES[@]}"; do
    echo "node $n: $(node "$n" status 2>&1)" || true
    node "$n" status >/dev/null 2>&1 || rc=3
  done
  return $rc
}

cmd_kill() {
  local pid
  pid="$(pid_of "$1")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || die "node $1 is not running"
  kill -KILL "$pid"
  while kill -0 "$pid" 2>/dev/null && [[ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)" != "Z" ]]; do
    sleep 0.05
  done
  log "node $1 killed (pid $pid)"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  bootstrap) bootstrap ;;
  # What a service or `wakeline.ops.admin topics` needs to use the cluster.
  # Its own topic prefix (unless one is set): the single broker's archive offsets are not this cluster's.
  env) printf 'export WAKELINE_KAFKA_BOOTSTRAP=%s WAKELINE_REPLICATION_FACTOR=3 WAKELINE_MIN_INSYNC_REPLICAS=2 WAKELINE_TOPIC_PREFIX=%s\n' \
         "$(bootstrap)" "${WAKELINE_TOPIC_PREFIX:-wakeline-cluster}" ;;
  kill) cmd_kill "${2:?usage: cluster.sh kill N}" ;;
  start) node "${2:?usage: cluster.sh start N}" up ;;
  stop) node "${2:?usage: cluster.sh stop N}" down ;;
  *)
    echo "usage: $0 up|down|status|env|bootstrap|kill N|start N|stop N" >&2
    exit 2
    ;;
esac
