-- 0005: signed checkpoints of every session's chain head (wakeline.checkpoints).
--
-- A consistent rewrite of a whole chain (every hash recomputed) verifies on its own;
-- what catches it is a head recorded earlier and signed with a key the database never
-- holds (HMAC-SHA256, key file on the checkpointer's host). Each checkpoint is also
-- appended to a JSONL file outside the database, so deleting these rows is detected too.
-- The signature covers id, tenant, created_at and heads; all are set by the writer.

CREATE TABLE checkpoints (
  id         uuid        PRIMARY KEY,
  tenant     text        NOT NULL CHECK (tenant <> ''),
  created_at timestamptz NOT NULL,
  -- {"<session_id>": {"seq": <last seq>, "hash": "<hash at that seq>"}, ...}
  heads      jsonb       NOT NULL CHECK (jsonb_typeof(heads) = 'object'),
  signature  text        NOT NULL
);
CREATE INDEX checkpoints_tenant_created ON checkpoints (tenant, created_at);
-- verify reads the checkpoints that name one session: heads ? session_id.
CREATE INDEX checkpoints_heads ON checkpoints USING gin (heads);

-- Append-only like the log, with the same guard; ALWAYS so session_replication_role
-- = replica does not bypass it.
CREATE TRIGGER checkpoints_refuse_change BEFORE UPDATE OR DELETE ON checkpoints
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER checkpoints_refuse_truncate BEFORE TRUNCATE ON checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
ALTER TABLE checkpoints ENABLE ALWAYS TRIGGER checkpoints_refuse_change;
ALTER TABLE checkpoints ENABLE ALWAYS TRIGGER checkpoints_refuse_truncate;

ALTER TABLE checkpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE checkpoints FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON checkpoints
  USING (tenant = current_setting('wakeline.tenant', true))
  WITH CHECK (tenant = current_setting('wakeline.tenant', true));

GRANT SELECT, INSERT ON checkpoints TO wakeline_service;
