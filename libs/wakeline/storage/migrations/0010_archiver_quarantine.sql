-- 0010: sessions the archiver parked instead of storing.
--
-- When an event cannot be stored (it conflicts with the archive, breaks the chain, is
-- refused by the database), the archiver dead-letters it and parks its session here:
-- the session's later events are dead-lettered too, never stored above the gap, while
-- every other session keeps being archived. A row is how a restarted archiver knows not
-- to try again, and how an operator sees what was parked and why. Keyed by
-- (tenant, session_id): two tenants claiming one session id park only the second.
-- Append-only like the log: releasing a session is a later decision, never an edit.
-- Not tenant data in the RLS sense (like dead_letters): only the archiver and
-- operators read it.

CREATE TABLE archiver_quarantine (
  id             bigserial   PRIMARY KEY,
  tenant         text        NOT NULL,
  session_id     text        NOT NULL,
  from_seq       bigint,      -- the first seq not stored; NULL if the record had none readable
  reason         text        NOT NULL,
  topic          text        NOT NULL,  -- the first record set aside
  partition      int         NOT NULL,
  "offset"       bigint      NOT NULL,
  consumer_group text        NOT NULL,
  quarantined_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant, session_id)
);
CREATE INDEX archiver_quarantine_at ON archiver_quarantine (quarantined_at);

CREATE TRIGGER archiver_quarantine_refuse_change BEFORE UPDATE OR DELETE ON archiver_quarantine
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER archiver_quarantine_refuse_truncate BEFORE TRUNCATE ON archiver_quarantine
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
ALTER TABLE archiver_quarantine ENABLE ALWAYS TRIGGER archiver_quarantine_refuse_change;
ALTER TABLE archiver_quarantine ENABLE ALWAYS TRIGGER archiver_quarantine_refuse_truncate;

GRANT SELECT, INSERT ON archiver_quarantine TO wakeline_service;
GRANT USAGE ON SEQUENCE archiver_quarantine_id_seq TO wakeline_service;
