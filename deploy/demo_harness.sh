#!/usr/bin/env bash
# Your own tools, with a kill -9 in the middle (docs/your-own-tools.md). A session declares
# `run_query`, which no runner runs: the user's harness (examples/ledger_harness.py) answers it
# from a SQLite ledger. The first harness receives the first call and is killed before it
# answers; the session keeps waiting for that call; a fresh harness is handed the same call
# again, answers it once, and the session completes. Called by `make demo-harness` after
# `make up`; the services keep running afterwards (`make down` stops them).
set -euo pipefail
ROOT="${WAKELINE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="$ROOT/.venv/bin"
cd "$ROOT"

bash deploy/services.sh up

# A user key, made as an operator would (demo.sh does the same); kept 0600 under .data/keys/.
KEYS="$ROOT/.data/keys"
mkdir -p "$KEYS" && chmod 700 "$KEYS"
(umask 077; "$BIN/wakeline" keys create --tenant default --principal demo --role user --note demo-harness \
   > "$KEYS/demo-harness.key")
export WAKELINE_API_KEY="$(cat "$KEYS/demo-harness.key")"
export WAKELINE_GATEWAY_URL="${WAKELINE_GATEWAY_URL:-http://127.0.0.1:${WAKELINE_HTTP_PORT:-18080}}"

if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  MODEL="${WAKELINE_DEMO_MODEL:-claude-sonnet-4-5}"
  echo "== model: $MODEL on Claude; it chooses its own queries"
else
  MODEL="scripted:ledger"
  echo "== model: scripted:ledger, the OFFLINE SCRIPTED MODEL (services/brain/policies/ledger.json): it asks"
  echo "   run_query twice, then reports. Set ANTHROPIC_API_KEY to run the same session on Claude."
fi

RUN=$(mktemp -d)
trap '[ -z "${HARNESS1:-}" ] || kill -9 "$HARNESS1" 2>/dev/null || true; rm -rf "$RUN"' EXIT
DB="$ROOT/.data/demo-ledger.sqlite3"
harness() { "$BIN/python" examples/ledger_harness.py --db "$DB" "$@"; }
session() {  # status and pending_client_calls of the session, as GET /v1/sessions/{id} has them
  curl -fsS -H "Authorization: Bearer $WAKELINE_API_KEY" "$WAKELINE_GATEWAY_URL/v1/sessions/$SID" |
    "$BIN/python" -c 'import json, sys; s = json.load(sys.stdin); print(s["status"], " ".join(s["pending_client_calls"]))'
}

SID=$(harness --create --model "$MODEL")
echo "== session $SID declares run_query {name, description, input_schema}; the ledger is $DB"

echo "== harness 1 starts (--hang-on-first-call: it receives a call, then holds it unanswered)"
# Started directly (not through `harness`), so $! is the harness's own pid, the process to kill.
"$BIN/python" examples/ledger_harness.py --db "$DB" "$SID" --hang-on-first-call > "$RUN/harness1.log" 2>&1 &
HARNESS1=$!
CALL="" STATE=""
for _ in $(seq 120); do
  CALL=$(sed -n 's/^call \([^ ]*\) received.*/\1/p' "$RUN/harness1.log" | head -1)
  STATE=$(session 2>/dev/null || true)
  if [ -n "$CALL" ] && [[ "$STATE" == "waiting_client "*"$CALL"* ]]; then break; fi
  kill -0 "$HARNESS1" 2>/dev/null || { cat "$RUN/harness1.log"; echo "demo: harness 1 exited" >&2; exit 1; }
  sleep 0.5
done
sed 's/^/   [harness 1] /' "$RUN/harness1.log"
[[ "$STATE" == "waiting_client "*"$CALL"* ]] || { echo "demo: no call pending within 60 s ($STATE)" >&2; exit 1; }
echo "== GET /v1/sessions/$SID: status ${STATE%% *}, pending_client_calls: ${STATE#* }"

kill -9 "$HARNESS1"
wait "$HARNESS1" 2>/dev/null || true
! kill -0 "$HARNESS1" 2>/dev/null || { echo "demo: harness 1 survived kill -9" >&2; exit 1; }
echo "== kill -9 harness 1 (pid $HARNESS1), call $CALL unanswered"
HARNESS1=""  # gone: the exit trap has nothing left to kill
sleep 1
AFTER=$(session)
echo "== the session, after the kill: status ${AFTER%% *}, pending_client_calls: ${AFTER#* }"
[[ "$AFTER" == "waiting_client "*"$CALL"* ]] || { echo "demo: the session no longer waits for $CALL" >&2; exit 1; }

echo "== harness 2 starts, a fresh process knowing only the session id:"
harness "$SID" 2>&1 | sed 's/^/   [harness 2] /'

for _ in $(seq 60); do [[ "$(session)" == ended* ]] && break; sleep 0.5; done  # the archive has caught up
echo
echo "== the session's log (tool calls, results, wakes; every harness start sends a wake):"
"$BIN/python" - "$SID" "$CALL" <<'PY'
import collections, os, sys
from wakeline_client import Wakeline

sid, reissued = sys.argv[1], sys.argv[2]
with Wakeline(os.environ["WAKELINE_GATEWAY_URL"], api_key=os.environ["WAKELINE_API_KEY"]) as client:
    events = client.sessions.events(sid, type=["tool_call", "tool_result", "woke", "session_ended"], limit=1000).data
results = collections.Counter()
for e in events:
    p = e.payload
    call_id = getattr(p, "tool_call_id", "")
    if e.type == "tool_result":
        results[call_id] += 1
    if e.type == "tool_call":
        detail = f"{call_id} {p.name}"
    elif e.type == "tool_result":
        detail = f"{call_id} {'error' if p.is_error else 'ok'}"
    else:
        detail = p.reason  # a wake's: `requested` when a harness starts
    print(f"   {e.seq:>4}  {e.type:<14} {e.actor:<24} {detail}")
print("== results per call id:", ", ".join(f"{c} = {n}" for c, n in results.items()))
ok = results[reissued] == 1 and all(n == 1 for n in results.values())
print(f"== {reissued} was issued to both harnesses and recorded {results[reissued]} time(s): "
      + ("once, as promised" if ok else "NOT once"))
sys.exit(0 if ok else 1)
PY
echo "   More: WAKELINE_API_KEY=\$(cat .data/keys/demo-harness.key) .venv/bin/wakeline transcript $SID --markdown"
