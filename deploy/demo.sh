#!/usr/bin/env bash
# The main job: the services (the four and the checkpoint signer) on the local stack, one agent session that uses tools in
# its sandbox, streamed live, then its transcript and audit queries over it, with API keys. The stack is
# left running to explore (`make down` stops it). Called by `make demo` after `make up`.
set -euo pipefail
ROOT="${WAKELINE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="$ROOT/.venv/bin"
cd "$ROOT"

bash deploy/services.sh up

# API keys, made the way an operator would (`wakeline keys create`, as the schema owner);
# each is printed once and only its hash is stored. Kept 0600 under .data/keys/.
KEYS="$ROOT/.data/keys"
mkdir -p "$KEYS" && chmod 700 "$KEYS"
new_key() {  # principal role -> path of a file holding the key
  (umask 077; "$BIN/wakeline" keys create --tenant default --principal "$1" --role "$2" --note demo \
     > "$KEYS/demo-$2.key")
  echo "$KEYS/demo-$2.key"
}
USER_KEY=$(new_key demo user)
AUDITOR_KEY=$(new_key auditor auditor)
ADMIN_KEY=$(new_key admin admin)
export WAKELINE_API_KEY="$(cat "$USER_KEY")"
echo "== keys: user:demo, auditor, admin (tenant default) in .data/keys/; the CLI reads WAKELINE_API_KEY"

if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  MODEL="${WAKELINE_DEMO_MODEL:-claude-sonnet-4-5}"
  echo "== model: $MODEL on Claude, through the anthropic SDK"
else
  MODEL="scripted:demo"
  echo "== model: scripted:demo — the OFFLINE SCRIPTED MODEL (deterministic, policy services/brain/policies/demo.json),"
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
echo "== hash chain, against an Ed25519-signed checkpoint of every chain head. The signer service holds"
echo "   the private key (.data/signer/signer.key); verify reads only its public key, pinned by fingerprint,"
echo "   and cross-checks the three witnesses (Postgres, the topic ${WAKELINE_TOPIC_PREFIX:-wakeline}.checkpoints, .data/witness/):"
FINGERPRINT=$("$BIN/wakeline-signer" keygen | sed -n 's/.*"fingerprint": "\([^"]*\)".*/\1/p')
# One round now, so the session's last events are anchored (the service signs on its schedule;
# should it take the same number at the same moment, one insert loses: try once more).
"$BIN/wakeline-signer" once --tenant default >/dev/null || "$BIN/wakeline-signer" once --tenant default >/dev/null
WAKELINE_EVIDENCE_PUBLIC_KEY_FILE="$ROOT/.data/signer/signer.key.pub" WAKELINE_EVIDENCE_KEY_FINGERPRINT="$FINGERPRINT" \
  "$BIN/wakeline" verify-direct "$SID" --tenant default --proof > "$ROOT/.data/demo-verify.jsonl"
head -1 "$ROOT/.data/demo-verify.jsonl" | cut -c1-300
tail -1 "$ROOT/.data/demo-verify.jsonl" > "$ROOT/.data/demo-proof.json"
echo "   inclusion proof, checked offline with the public key alone:"
"$BIN/wakeline" proof-check "$ROOT/.data/demo-proof.json" --public-key-file "$ROOT/.data/signer/signer.key.pub" \
  --fingerprint "$FINGERPRINT"
echo "== the same chain through the gateway (also against the older HMAC checkpoint, key in .data/keys):"
"$BIN/wakeline" checkpoints write --tenant default
"$BIN/wakeline" verify "$SID"

echo
as_role() { local key="$1"; shift; WAKELINE_API_KEY="$(cat "$key")" "$BIN/wakeline" "$@"; }

echo "== audit (as the auditor): every tool call and result of this session, and who ran it"
as_role "$AUDITOR_KEY" audit --type tool_call --type tool_result --session "$SID" --since 1h
echo "== audit: the sessions user:demo touched in the last hour"
as_role "$AUDITOR_KEY" audit --principal demo --sessions --since 1h
echo "== audit: an auditor may read but not write:"
as_role "$AUDITOR_KEY" send "$SID" "let me in" || true
echo "== tamper evidence, every session of the tenant (chains, key registry, signed checkpoints):"
as_role "$AUDITOR_KEY" verify --all | tail -1 || true
echo "== who read the audit trail (as the admin):"
as_role "$ADMIN_KEY" audit --access-log --since 1h --limit 5

echo "== session $SID ended with exit code $reason (0 = completed)."
echo "   Explore: export WAKELINE_API_KEY=\$(cat .data/keys/demo-user.key); .venv/bin/wakeline sessions | events $SID | replay $SID"
echo "            ${WAKELINE_GATEWAY_URL:-http://127.0.0.1:${WAKELINE_HTTP_PORT:-18080}}/docs (Authorize with the same key)"
echo "   Services keep running (logs in .data/logs/); 'make down' stops everything."
