-- 0022: a chain hash is stored as its 32 bytes, not as 64 hex characters (issue 10, storage).
--
-- events.prev_hash, events.hash and event_keys.hash held a SHA-256 as lowercase hex text,
-- 65 bytes each on disk; as bytea they are 33. That is 96 bytes of each archived event's
-- ~1.19 KB (bench/audit_load's 1M events). What leaves the database is unchanged: every
-- reader selects `encode(hash, 'hex')`, so events, heads, retention cuts and checkpoints
-- carry the same hex strings as before, and the hashes (which cover prev_hash as hex
-- text) are the same. The CHECKs make the column hold a SHA-256 and nothing else.
--
-- A stored hash that is not 64 lowercase hex digits cannot have come from a writer (the
-- archiver refuses such records, and chain.seal makes none): it is damage or tampering,
-- and converting it would lose it. So the migration stops and names one instead.
-- (Checked in the rewrite itself: a check that read the rows first would see none, since
-- FORCE ROW LEVEL SECURITY binds the owner this runs as.)
CREATE FUNCTION pg_temp.stored_hash(hex text, tbl text, session_id text, seq bigint) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF hex !~ '^[0-9a-f]{64}$' THEN
    RAISE EXCEPTION 'wakeline 0022: % holds a hash that is not 64 lowercase hex digits (session %, seq %): %',
      tbl, session_id, seq, left(hex, 80)
      USING ERRCODE = 'data_exception',
            HINT = 'no Wakeline writer stores one; keep a copy of the row and investigate it before '
                   'migrating, with the release before this one (`wakeline verify-direct`)';
  END IF;
  RETURN decode(hex, 'hex');
END $$;

-- One rewrite of each table (ALTER TYPE does not fire the append-only row triggers; the
-- indexes, none of which holds a hash, are rebuilt with it).
ALTER TABLE events
  ALTER COLUMN prev_hash TYPE bytea USING pg_temp.stored_hash(prev_hash, 'events', session_id, seq),
  ALTER COLUMN hash TYPE bytea USING pg_temp.stored_hash(hash, 'events', session_id, seq),
  ADD CONSTRAINT events_hash_sha256 CHECK (octet_length(hash) = 32 AND octet_length(prev_hash) = 32);
ALTER TABLE event_keys
  ALTER COLUMN hash TYPE bytea USING pg_temp.stored_hash(hash, 'event_keys', session_id, seq),
  ADD CONSTRAINT event_keys_hash_sha256 CHECK (octet_length(hash) = 32);

-- A fork's link (0016): the payload names the parent's hash in hex, as the event carries it.
CREATE OR REPLACE FUNCTION check_fork_point() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  parent text := NEW.payload->>'parent_session_id';
  at_seq bigint := (NEW.payload->>'fork_seq')::bigint;
  parent_hash text := NEW.payload->>'parent_hash';
BEGIN
  IF parent IS NULL OR at_seq IS NULL OR parent_hash IS NULL OR NEW.seq <> at_seq + 1
     OR encode(NEW.prev_hash, 'hex') <> parent_hash OR parent = NEW.session_id THEN
    RAISE EXCEPTION 'wakeline: forked event of % at seq % does not name its fork point (parent %, seq %)',
      NEW.session_id, NEW.seq, parent, at_seq USING ERRCODE = 'check_violation';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.event_keys k WHERE k.session_id = parent AND k.seq = at_seq
                   AND k.hash = NEW.prev_hash AND k.tenant = NEW.tenant)
     AND NOT EXISTS (SELECT 1 FROM public.events e WHERE e.session_id = parent AND e.seq = at_seq
                       AND e.hash = NEW.prev_hash AND e.tenant = NEW.tenant) THEN
    RAISE EXCEPTION 'wakeline: forked event of % names seq % of % with hash %, which its tenant''s archive does not hold',
      NEW.session_id, at_seq, parent, parent_hash USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;
REVOKE EXECUTE ON FUNCTION check_fork_point() FROM PUBLIC;

-- 0004's drop, unchanged but for the heads it records: hex, as retention_cuts() returns
-- them and as every head recorded before this migration is.
CREATE OR REPLACE FUNCTION drop_events_partition(part_name text, as_of timestamptz,
                                      default_keep interval DEFAULT NULL)
RETURNS retention_log
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s' AS $$
DECLARE
  cut      timestamptz := least(as_of, now());
  part     regclass := to_regclass(format('public.%I', part_name));
  bounds   record;
  blockers text[];
  entry    public.retention_log;
BEGIN
  PERFORM public.require_maintenance_session();
  PERFORM public.check_default_keep(default_keep);
  PERFORM pg_advisory_xact_lock(hashtext('wakeline.retention'));
  IF part IS NULL THEN
    RAISE EXCEPTION 'wakeline: % is not a partition of events', part_name
      USING ERRCODE = 'undefined_table';
  END IF;
  -- Writers to this month wait from here until commit: what is counted is what is
  -- dropped. Taken before DETACH's lock on events, so a transaction that holds events
  -- and then writes this month (a backfill, or an unpruned UPDATE/DELETE, refused
  -- anyway) can deadlock with us; Postgres aborts one, and a retention run is retried.
  -- Locking events first instead would pause the whole log for the count below.
  EXECUTE format('LOCK TABLE %s IN SHARE MODE', part);
  SELECT * INTO bounds FROM public.events_partition_bounds(part);
  IF bounds.range_to > cut THEN
    RAISE EXCEPTION 'wakeline: % ends at %, after the cut %', part, bounds.range_to, cut
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  blockers := public.events_retention_blockers(bounds.range_from, bounds.range_to, cut, default_keep);
  IF blockers <> '{}' THEN
    RAISE EXCEPTION 'wakeline: % holds tenants inside their retention window: %', part, blockers
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;

  INSERT INTO public.retention_log
         (partition_name, range_from, range_to, event_count, chain_heads, tenant_windows, dropped_by)
  SELECT part_name, bounds.range_from, bounds.range_to,
         (SELECT count(*) FROM public.events e
           WHERE e.ts >= bounds.range_from AND e.ts < bounds.range_to),
         (SELECT coalesce(jsonb_agg(jsonb_build_object('tenant', h.tenant, 'session_id', h.session_id,
                                                       'seq', h.seq, 'hash', encode(h.hash, 'hex'))
                                    ORDER BY h.session_id), '[]')
            FROM (SELECT DISTINCT ON (e.session_id) e.tenant, e.session_id, e.seq, e.hash
                    FROM public.events e
                   WHERE e.ts >= bounds.range_from AND e.ts < bounds.range_to
                   ORDER BY e.session_id, e.seq DESC) h),
         (SELECT coalesce(jsonb_object_agg(w.tenant, w.keep::text), '{}')
            FROM public.events_tenant_windows(bounds.range_from, bounds.range_to, default_keep) w),
         session_user
  RETURNING * INTO entry;

  EXECUTE format('ALTER TABLE public.events DETACH PARTITION %s', part);
  EXECUTE format('DROP TABLE %s', part);
  RETURN entry;
END $$;

REVOKE EXECUTE ON FUNCTION drop_events_partition(text, timestamptz, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION drop_events_partition(text, timestamptz, interval) TO wakeline_maintenance;
