-- 0007: a retention cut is final, and verifiable by the tenant it cut.
--
-- A month that retention_log records as dropped is never created again: a replay (the
-- archiver re-reading Kafka from an old offset) or a late write into it must not bring
-- the partition back, empty, for a second history to grow in. And verify, which runs as
-- wakeline_service, may read its own tenant's side of each cut (retention_cuts below),
-- so that seqs dropped on purpose are told apart from rows removed behind its back.

-- 0001's function, unchanged but for the refusal after the lock. SQLSTATE WLR01 is ours
-- (wakeline.retention_cuts.RETAINED_OUT_SQLSTATE), so a caller can tell it from any other
-- failure; raising rather than returning NULL means a caller that ignores the result
-- still cannot insert into the month (the insert would find no partition anyway).
CREATE OR REPLACE FUNCTION ensure_events_partition(at_ts timestamptz) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  lo   timestamptz := date_trunc('month', at_ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  hi   timestamptz := ((date_trunc('month', at_ts AT TIME ZONE 'UTC') + interval '1 month')
                       AT TIME ZONE 'UTC');
  name text := to_char(at_ts AT TIME ZONE 'UTC', '"events_y"YYYY"m"MM');
  trg  record;
BEGIN
  IF to_regclass('public.' || name) IS NOT NULL THEN
    RETURN name;
  END IF;
  -- Serialise concurrent creators of the same month (CREATE ... IF NOT EXISTS races).
  PERFORM pg_advisory_xact_lock(hashtext('wakeline.ensure_events_partition'));
  IF to_regclass('public.' || name) IS NOT NULL THEN
    RETURN name;
  END IF;
  -- Overlap, not equality: whatever bounds the dropped partition had, none of it returns.
  IF EXISTS (SELECT 1 FROM public.retention_log r WHERE r.range_from < hi AND r.range_to > lo) THEN
    RAISE EXCEPTION 'wakeline: % was dropped by retention; its month is not created again', name
      USING ERRCODE = 'WLR01',
            DETAIL = format('[%s, %s), the month of %s, overlaps a range retention_log records '
                            'as dropped', lo, hi, at_ts),
            HINT = 'events of a dropped month survive only as event_keys tombstones';
  END IF;
  EXECUTE format(
    'CREATE TABLE public.%I PARTITION OF public.events FOR VALUES FROM (%L) TO (%L)',
    name, to_char(lo AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS"+00"'),
          to_char(hi AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS"+00"'));
  EXECUTE format(
    'CREATE TRIGGER %I BEFORE TRUNCATE ON public.%I FOR EACH STATEMENT '
    'EXECUTE FUNCTION public.refuse_change()', name || '_refuse_truncate', name);
  -- Partitions do not inherit RLS; queries through events use its policy, this one
  -- covers anyone reading a partition by name.
  EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', name);
  EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', name);
  EXECUTE format(
    'CREATE POLICY tenant_isolation ON public.%I '
    'USING (tenant = current_setting(''wakeline.tenant'', true)) '
    'WITH CHECK (tenant = current_setting(''wakeline.tenant'', true))', name);
  -- Cloned row triggers inherit ENABLE ALWAYS in PG15; assert it rather than rely on it.
  FOR trg IN SELECT tgname FROM pg_trigger
             WHERE tgrelid = ('public.' || name)::regclass AND tgenabled <> 'A'
               AND NOT tgisinternal LOOP
    EXECUTE format('ALTER TABLE public.%I ENABLE ALWAYS TRIGGER %I', name, trg.tgname);
  END LOOP;
  RETURN name;
END $$;

-- The caller tenant's chain heads of every cut: per dropped range, each of its sessions'
-- last event there. retention_log itself stays unreadable to the service: its counts,
-- windows and heads span all tenants. No tenant set: no rows.
CREATE FUNCTION retention_cuts(for_session text DEFAULT NULL)
RETURNS TABLE (log_id bigint, range_from timestamptz, range_to timestamptz, dropped_at timestamptz,
               session_id text, seq bigint, hash text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT r.id, r.range_from, r.range_to, r.dropped_at, h.session_id, h.seq, h.hash
    FROM public.retention_log r
   CROSS JOIN LATERAL jsonb_to_recordset(r.chain_heads)
         AS h(tenant text, session_id text, seq bigint, hash text)
   WHERE h.tenant = current_setting('wakeline.tenant', true)
     AND (for_session IS NULL OR h.session_id = for_session)
   ORDER BY h.session_id, r.range_from
$$;

-- CREATE OR REPLACE kept ensure_events_partition's grants; said again where it matters.
REVOKE EXECUTE ON FUNCTION ensure_events_partition(timestamptz), retention_cuts(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ensure_events_partition(timestamptz), retention_cuts(text) TO wakeline_service;
