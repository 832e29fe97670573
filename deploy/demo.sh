#!/usr/bin/env bash
# The main job: the four services on the local stack, one agent session that uses tools in
# its sandbox, streamed live, then its transcript and an audit query over it. The stack is
# left running to explore (`make down` stops it). Called by `make demo` after `make up`.
set -euo pipefail
ROOT="${WAKELINE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="$ROOT/.venv/bin"
cd "$ROOT"

bash deploy/services.sh up

if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  MODEL="${WAKELINE_DEMO_MODEL:-claude-sonnet-4-5}"
  echo "== model: $MODEL on Claude, through the anthropic SDK"
else
  MODEL="scripted:demo"
  echo "== model: scripted:demo — the OFFLINE SCRIPTED MODEL (deterministic, policy deploy/policies/demo.json),"
  echo "   labelled as agent:scripted:demo in every event it causes. Set ANTHROPIC_API_KEY to run on Claude."
fi

TASK="Look at what is in your sandbox, write a small Python script that counts the most common words in a sample text, run it, and report the result."
echo "== task: $TASK"
echo "== live events (seq, type, actor, summary):"
ids=$(mktemp)
set +e
"$BIN/wakeline" run "$TASK" --model "$MODEL" 2> >(tee "$ids" >&2)
reason=$?
set -e
sleep 0.2
SID=$(grep -o 'session [0-9a-f-]\{36\}' "$ids" | head -1 | cut -d' ' -f2)
rm -f "$ids"
[ -n "$SID" ] || { echo "demo: no session was created; see .data/logs/*.log" >&2; exit 1; }

echo
echo "== transcript (markers skipped; tool output shown as data):"
"$BIN/wakeline" transcript "$SID" --markdown
"$BIN/wakeline" transcript "$SID" --html "$ROOT/.data/demo-transcript.html" >/dev/null
echo "   (self-contained HTML: .data/demo-transcript.html)"

echo
echo "== hash chain:"
"$BIN/wakeline" verify "$SID"

echo
echo "== audit: every tool call in the last hour across sessions of tenant 'default', who ran it, outcome"
PGPASSWORD=wakeline_service psql -X -q -h 127.0.0.1 -p "${WAKELINE_PG_PORT:-15432}" -U wakeline_service wakeline <<SQL
BEGIN;
SELECT set_config('wakeline.tenant', 'default', true) \gset
SELECT c.session_id = '$SID' AS this_session, r.actor AS ran_by, c.tool_name AS tool,
       r.is_error AS failed, count(*) AS calls, min(c.ts) AS first, max(r.ts) AS last
  FROM events c JOIN events r ON r.session_id = c.session_id AND r.type = 'tool_result'
       AND r.payload->>'tool_call_id' = c.payload->>'tool_call_id'
 WHERE c.type = 'tool_call' AND c.ts > now() - interval '1 hour'
 GROUP BY 1, 2, 3, 4 ORDER BY 1 DESC, 3;
COMMIT;
SQL

echo "== session $SID ended with exit code $reason (0 = completed)."
echo "   Explore: .venv/bin/wakeline sessions | events $SID | replay $SID;  http://127.0.0.1:18080/docs"
echo "   Services keep running (logs in .data/logs/); 'make down' stops everything."
