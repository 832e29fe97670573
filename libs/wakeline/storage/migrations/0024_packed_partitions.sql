-- 0024: a new month's partition stores its columns in the order that packs a row (issue 10,
-- storage).
--
-- `CREATE TABLE ... PARTITION OF events` takes the parent's column order, 0001's: `seq`
-- after a text column, `ts` after `trust`, `archived_at` after the payload. Each 8-byte
-- column then starts on the next multiple of 8 and a payload whose header is 4 bytes on
-- the next multiple of 4: padding in every row. A partition may order its columns as it
-- likes (Postgres matches them by name when rows are routed through events, and converts
-- the row), so a new month is now created as a plain table, fixed-width columns widest
-- first, then attached. About 6.5 bytes less per row (391.3 -> 384.2 on 479k rows of
-- bench/audit_sessions, measured with CREATE TABLE AS in both orders). Months created
-- before this migration keep 0001's order: reordering them means rewriting them, and
-- nothing reads a partition's physical order.
--
-- What the partition must match stays explicit: ATTACH refuses a table whose columns,
-- types, NOT NULLs or CHECK constraints differ from events'. A column added to events
-- later has to be added here too, or the next month's ATTACH fails (loudly, in the
-- archiver's insert), which is what we want rather than a partition that silently differs.
--
-- ATTACH takes SHARE UPDATE EXCLUSIVE on events where CREATE ... PARTITION OF took
-- ACCESS EXCLUSIVE, so a new month no longer waits for (or stalls) readers of events. The
-- indexes of events are created on the partition by ATTACH, its row triggers are cloned,
-- and what 0013 added after creating a partition (its truncate guard, the key-registry
-- statement trigger, row-level security and its policy, ENABLE ALWAYS) is done as before,
-- the security through 0011's wakeline_tenant_scoped.
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
  -- 8-byte columns, then the payload (its 4-byte header lands aligned), then the uuid and
  -- the hashes, the boolean, and the short texts, whose 1-byte headers need no alignment.
  -- Constraints carry events' names, so a partition reads like the others in \d.
  EXECUTE format(
    'CREATE TABLE public.%I ('
    '  seq          bigint      NOT NULL CONSTRAINT events_seq_check CHECK (seq >= 1),'
    '  ts           timestamptz NOT NULL,'
    '  archived_at  timestamptz NOT NULL DEFAULT now(),'
    '  payload      jsonb       NOT NULL,'
    '  event_id     uuid        NOT NULL,'
    '  prev_hash    bytea       NOT NULL,'
    '  hash         bytea       NOT NULL,'
    '  is_error     boolean,'
    '  tenant       text        NOT NULL CONSTRAINT events_tenant_check CHECK (tenant <> %L),'
    '  session_id   text        NOT NULL,'
    '  type         text        NOT NULL,'
    '  actor        text        NOT NULL,'
    '  trust        text        NOT NULL CONSTRAINT events_trust_check CHECK (trust IN (%L, %L)),'
    '  causation_id text,'
    '  tool_name    text,'
    '  CONSTRAINT events_hash_sha256 CHECK (octet_length(hash) = 32 AND octet_length(prev_hash) = 32)'
    ')', name, '', 'instruction', 'data');
  EXECUTE format(
    'ALTER TABLE public.events ATTACH PARTITION public.%I FOR VALUES FROM (%L) TO (%L)',
    name, to_char(lo AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS"+00"'),
          to_char(hi AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS"+00"'));
  EXECUTE format(
    'CREATE TRIGGER %I BEFORE TRUNCATE ON public.%I FOR EACH STATEMENT '
    'EXECUTE FUNCTION public.refuse_change()', name || '_refuse_truncate', name);
  PERFORM public.wakeline_record_event_keys(format('public.%I', name)::regclass);
  -- Partitions do not inherit RLS; queries through events use its policy, this one
  -- covers anyone reading a partition by name (0011's recipe, the policy 0013 wrote out).
  PERFORM public.wakeline_tenant_scoped(format('public.%I', name)::regclass);
  -- Cloned row triggers inherit ENABLE ALWAYS in PG15; assert it rather than rely on it.
  FOR trg IN SELECT tgname FROM pg_trigger
             WHERE tgrelid = ('public.' || name)::regclass AND tgenabled <> 'A'
               AND NOT tgisinternal LOOP
    EXECUTE format('ALTER TABLE public.%I ENABLE ALWAYS TRIGGER %I', name, trg.tgname);
  END LOOP;
  RETURN name;
END $$;

-- CREATE OR REPLACE keeps the function's grants; said again so this file reads whole.
REVOKE EXECUTE ON FUNCTION ensure_events_partition(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ensure_events_partition(timestamptz) TO wakeline_service;

-- Months that exist but have never held a row are made again in the packed order: 0001
-- creates 2025-01 .. 2027-12 when a database is new, so without this a new install would
-- store nothing packed before 2028. "Never held a row" is a heap of 0 bytes: the log is
-- append-only, so a month that ever stored an event (or began to, in a transaction that
-- rolled back) has pages and is left as it is. Not a count of rows: FORCE ROW LEVEL
-- SECURITY binds the owner this runs as, and a count would see none (0022's lesson).
-- events is locked first, for the few statements this takes, so that no insert can
-- reach a month between its check and its drop, and no insert holding events can
-- deadlock against a drop that needs it. Migrations run before the services start
-- (make up, the deploy's migrate job); a running archiver would wait here, not fail.
DO $$
DECLARE
  part record;
BEGIN
  LOCK TABLE public.events IN ACCESS EXCLUSIVE MODE;
  FOR part IN
    SELECT c.oid::regclass AS rel, b.range_from
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
           LATERAL public.events_partition_bounds(c.oid::regclass) b
     WHERE i.inhparent = 'public.events'::regclass AND pg_relation_size(c.oid) = 0
       AND (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum = 1) <> 'seq'
     ORDER BY b.range_from
  LOOP
    EXECUTE format('DROP TABLE %s', part.rel);
    PERFORM public.ensure_events_partition(part.range_from);
  END LOOP;
END $$;
