-- 0025: declared tools (issue 32), the calls a session's own harness answers.
--
-- sessions.pending_client counts the session's declared-tool calls still waiting for a
-- result, as wakeline.status projects it from the events (a call one up, its result one
-- down, the session's end back to 0): the status `waiting_client` and the pool's search
-- for work both read it. The partial index holds only sessions that wait, so a pool
-- worker's scan of its tenant touches those and nothing else.
ALTER TABLE sessions ADD COLUMN pending_client integer NOT NULL DEFAULT 0 CHECK (pending_client >= 0);
CREATE INDEX sessions_tenant_waiting_client ON sessions (tenant, updated_at) WHERE pending_client > 0;

-- Which pool worker holds which call, until when. Coordination, not history: a lease is
-- taken, renewed and given back, so this table is updated and deleted from, unlike the
-- log. It lives here so every gateway replica sees the same leases; the log alone decides
-- what is pending, and a result is recorded once whoever holds the lease.
CREATE TABLE tool_call_leases (
  tenant       text NOT NULL CHECK (tenant <> ''),
  session_id   text NOT NULL,
  tool_call_id text NOT NULL,
  worker       text NOT NULL,
  leased_at    timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  PRIMARY KEY (tenant, session_id, tool_call_id)
);
CREATE INDEX tool_call_leases_worker ON tool_call_leases (tenant, worker);
SELECT wakeline_tenant_scoped('tool_call_leases');
GRANT SELECT, INSERT, UPDATE, DELETE ON tool_call_leases TO wakeline_service;
