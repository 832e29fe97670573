-- 0016: a fork's `forked` event must name a real point of its parent's log (issue 11).
--
-- A fork's history is its parent's events 1..fork_seq, read from the parent and never
-- copied; the fork's own log starts at fork_seq + 1 with a `forked` event whose prev_hash
-- is the parent's hash at fork_seq. The archiver checks that link before it inserts
-- (conflict.select_new); this makes the database refuse, whoever inserts, a `forked` row
-- that is not at fork_seq + 1, that links to a hash the parent does not hold at fork_seq,
-- or whose parent is another tenant's or not archived. An AFTER ROW trigger sees the rows
-- of its own statement, so the parent's row is looked for in events as well as in
-- event_keys (whose statement trigger, 0013, runs after the row triggers).
CREATE FUNCTION check_fork_point() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  parent text := NEW.payload->>'parent_session_id';
  at_seq bigint := (NEW.payload->>'fork_seq')::bigint;
  parent_hash text := NEW.payload->>'parent_hash';
BEGIN
  IF parent IS NULL OR at_seq IS NULL OR parent_hash IS NULL OR NEW.seq <> at_seq + 1
     OR NEW.prev_hash <> parent_hash OR parent = NEW.session_id THEN
    RAISE EXCEPTION 'wakeline: forked event of % at seq % does not name its fork point (parent %, seq %)',
      NEW.session_id, NEW.seq, parent, at_seq USING ERRCODE = 'check_violation';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.event_keys k WHERE k.session_id = parent AND k.seq = at_seq
                   AND k.hash = parent_hash AND k.tenant = NEW.tenant)
     AND NOT EXISTS (SELECT 1 FROM public.events e WHERE e.session_id = parent AND e.seq = at_seq
                       AND e.hash = parent_hash AND e.tenant = NEW.tenant) THEN
    RAISE EXCEPTION 'wakeline: forked event of % names seq % of % with hash %, which its tenant''s archive does not hold',
      NEW.session_id, at_seq, parent, parent_hash USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;
REVOKE EXECUTE ON FUNCTION check_fork_point() FROM PUBLIC;

CREATE TRIGGER events_check_fork_point AFTER INSERT ON events
  FOR EACH ROW WHEN (NEW.type = 'forked') EXECUTE FUNCTION check_fork_point();
ALTER TABLE events ENABLE ALWAYS TRIGGER events_check_fork_point;

-- The tree of a session (GET /v1/sessions/{id}/tree) reads the forks taken from it.
CREATE INDEX sessions_tenant_parent ON sessions (tenant, parent_session_id, fork_seq)
  WHERE parent_session_id IS NOT NULL;
