-- 0013: event_keys is filled once per INSERT statement, not once per row (issue 10).
--
-- 0001's row trigger ran a PL/pgSQL call and a one-row INSERT for every event: 50-65%
-- of an insert's server time. A statement trigger reads the statement's inserted rows
-- from its transition table and registers them in one INSERT ... SELECT. What the
-- database enforces is unchanged: every row inserted into events has its event_keys row,
-- in the same statement, so a second (session_id, seq) under any ts or a reused event_id
-- still fails that statement (event_keys_pkey / event_keys_event_id_key).
--
-- A statement trigger fires only for the table the statement names (rows routed from
-- events to a partition do not fire the partition's own), so events and every partition
-- carry one: an insert into a partition by name is registered too, never twice.

-- Definer: the service role has no write privilege on event_keys. The owner is bound by
-- FORCE ROW LEVEL SECURITY; the key rows pass WITH CHECK with the tenant the events passed.
CREATE FUNCTION record_event_keys() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  INSERT INTO public.event_keys (session_id, seq, event_id, tenant, ts, hash)
  SELECT i.session_id, i.seq, i.event_id, i.tenant, i.ts, i.hash FROM inserted AS i;
  RETURN NULL;
END $$;

-- events and each partition: the same trigger, ENABLE ALWAYS (replica role does not skip it).
CREATE FUNCTION wakeline_record_event_keys(target regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  EXECUTE format('CREATE TRIGGER events_record_keys AFTER INSERT ON %s REFERENCING NEW TABLE AS inserted '
                 'FOR EACH STATEMENT EXECUTE FUNCTION public.record_event_keys()', target);
  EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER events_record_keys', target);
END $$;

SELECT wakeline_record_event_keys('public.events');
SELECT wakeline_record_event_keys(i.inhrelid::regclass)
  FROM pg_inherits i WHERE i.inhparent = 'public.events'::regclass;

-- Dropping the partitioned table's row trigger drops its clone on every partition.
DROP TRIGGER events_record_key ON events;
DROP FUNCTION record_event_key();

-- 0007's function, unchanged but for the new partition's events_record_keys trigger.
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
  PERFORM public.wakeline_record_event_keys(format('public.%I', name)::regclass);
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

-- Grants, said again: CREATE OR REPLACE kept ensure_events_partition's.
REVOKE EXECUTE ON FUNCTION record_event_keys(), wakeline_record_event_keys(regclass) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION ensure_events_partition(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ensure_events_partition(timestamptz) TO wakeline_service;
