-- 0001: the append-only event log, its key registry, the sessions projection,
-- archiver offsets and dead letters. Run by wakeline.migrate as wakeline_owner,
-- so wakeline_owner owns everything here; services connect as wakeline_service.

-- Functions are executable by PUBLIC unless revoked; ours are granted one by one.
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- Append-only guard, shared by events, its partitions and event_keys.
CREATE FUNCTION refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION 'wakeline: % on %.% refused: the event log is append-only',
    TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END $$;

CREATE TABLE events (
  tenant       text        NOT NULL CHECK (tenant <> ''),
  session_id   text        NOT NULL,
  seq          bigint      NOT NULL CHECK (seq >= 1),
  event_id     uuid        NOT NULL,
  causation_id text,
  type         text        NOT NULL,
  actor        text        NOT NULL,
  trust        text        NOT NULL CHECK (trust IN ('instruction', 'data')),
  ts           timestamptz NOT NULL,
  prev_hash    text        NOT NULL,
  hash         text        NOT NULL,
  payload      jsonb       NOT NULL,
  tool_name    text,        -- derived from payload by the writer, for audit queries
  is_error     boolean,     -- idem
  archived_at  timestamptz NOT NULL DEFAULT now(),
  -- The partition key must be part of any unique constraint, so this alone does not
  -- stop a second (session_id, seq) with another ts: event_keys below does. It does
  -- make an exact redelivery a no-op under INSERT ... ON CONFLICT DO NOTHING.
  PRIMARY KEY (session_id, seq, ts)
) PARTITION BY RANGE (ts);

CREATE INDEX events_tenant_actor_ts ON events (tenant, actor, ts);
CREATE INDEX events_tenant_ts ON events (tenant, ts);
CREATE INDEX events_tenant_type_ts ON events (tenant, type, ts);
CREATE INDEX events_tenant_tool_ts ON events (tenant, tool_name, ts) WHERE tool_name IS NOT NULL;
CREATE INDEX events_tenant_session_seq ON events (tenant, session_id, seq);

-- One row per event, not partitioned, so uniqueness of (session_id, seq) and of
-- event_id holds across all partitions whatever the ts.
CREATE TABLE event_keys (
  session_id text        NOT NULL,
  seq        bigint      NOT NULL,
  event_id   uuid        NOT NULL UNIQUE,
  tenant     text        NOT NULL CHECK (tenant <> ''),
  ts         timestamptz NOT NULL,
  hash       text        NOT NULL,
  PRIMARY KEY (session_id, seq)
);

-- SECURITY DEFINER so the service role needs no write privilege on event_keys. The
-- owner is subject to FORCE ROW LEVEL SECURITY too: the key row passes WITH CHECK
-- because its tenant is the event's, which already passed.
CREATE FUNCTION record_event_key() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  INSERT INTO public.event_keys (session_id, seq, event_id, tenant, ts, hash)
  VALUES (NEW.session_id, NEW.seq, NEW.event_id, NEW.tenant, NEW.ts, NEW.hash);
  RETURN NULL;
END $$;

-- Row triggers on a partitioned table are cloned to every partition (present and
-- future), and ENABLE ALWAYS recurses; statement triggers (TRUNCATE) are not cloned,
-- so ensure_events_partition adds one to each partition.
CREATE TRIGGER events_refuse_change BEFORE UPDATE OR DELETE ON events
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON events
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
CREATE TRIGGER events_record_key AFTER INSERT ON events
  FOR EACH ROW EXECUTE FUNCTION record_event_key();
-- ALWAYS: session_replication_role = replica must not bypass them.
ALTER TABLE events ENABLE ALWAYS TRIGGER events_refuse_change;
ALTER TABLE events ENABLE ALWAYS TRIGGER events_refuse_truncate;
ALTER TABLE events ENABLE ALWAYS TRIGGER events_record_key;

CREATE TRIGGER event_keys_refuse_change BEFORE UPDATE OR DELETE ON event_keys
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER event_keys_refuse_truncate BEFORE TRUNCATE ON event_keys
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
ALTER TABLE event_keys ENABLE ALWAYS TRIGGER event_keys_refuse_change;
ALTER TABLE event_keys ENABLE ALWAYS TRIGGER event_keys_refuse_truncate;

-- Creates the UTC month's partition of events if missing, guarded the same way as
-- the parent. Callable by the service before writing an event for a new month.
CREATE FUNCTION ensure_events_partition(at_ts timestamptz) RETURNS text
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

DO $$
DECLARE m date;
BEGIN
  FOR m IN SELECT generate_series(date '2025-01-01', date '2027-12-01', interval '1 month') LOOP
    PERFORM ensure_events_partition(m::timestamp AT TIME ZONE 'UTC');
  END LOOP;
END $$;

CREATE TABLE sessions (
  tenant            text        NOT NULL CHECK (tenant <> ''),
  session_id        text        PRIMARY KEY,
  owner             text        NOT NULL,   -- principal that created the session
  title             text,
  model             text,
  status            text        NOT NULL,
  last_seq          bigint      NOT NULL,
  last_hash         text        NOT NULL,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  ended_reason      text,
  parent_session_id text,
  fork_seq          bigint,
  deleted_at        timestamptz,
  deleted_by        text
);
CREATE INDEX sessions_tenant_updated ON sessions (tenant, updated_at);
CREATE INDEX sessions_tenant_owner ON sessions (tenant, owner);

-- Tenant isolation. FORCE makes it bind the owner too; with no wakeline.tenant set
-- current_setting(..., true) is NULL (or '') and nothing matches.
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['events', 'event_keys', 'sessions'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format(
      'CREATE POLICY tenant_isolation ON %I '
      'USING (tenant = current_setting(''wakeline.tenant'', true)) '
      'WITH CHECK (tenant = current_setting(''wakeline.tenant'', true))', t);
  END LOOP;
END $$;

-- Not tenant data: no RLS. Written in the same transaction as the projected rows.
CREATE TABLE archiver_offsets (
  consumer_group text        NOT NULL,
  topic          text        NOT NULL,
  partition      int         NOT NULL,
  next_offset    bigint      NOT NULL,
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer_group, topic, partition)
);

CREATE TABLE dead_letters (
  id          bigserial   PRIMARY KEY,
  topic       text        NOT NULL,
  partition   int         NOT NULL,
  "offset"    bigint      NOT NULL,
  key         text,
  value       text,
  reason      text        NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (topic, partition, "offset")
);

-- The service role: no ownership, no DDL, no UPDATE/DELETE on the log.
GRANT SELECT, INSERT ON events TO wakeline_service;
GRANT SELECT ON event_keys TO wakeline_service;
GRANT SELECT, INSERT, UPDATE ON sessions, archiver_offsets TO wakeline_service;
GRANT SELECT, INSERT ON dead_letters TO wakeline_service;
GRANT USAGE ON SEQUENCE dead_letters_id_seq TO wakeline_service;
REVOKE EXECUTE ON FUNCTION refuse_change(), record_event_key(), ensure_events_partition(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ensure_events_partition(timestamptz) TO wakeline_service;
