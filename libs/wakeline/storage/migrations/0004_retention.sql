-- 0004: retention. Whole monthly partitions of events are dropped once every tenant
-- with rows in them is past its window, by the wakeline_maintenance role only, and
-- each drop is recorded in the append-only retention_log (range, count, chain heads).
--
-- event_keys rows of dropped events are KEPT (the table is append-only anyway): they
-- hold no payload, only (session_id, seq, event_id, tenant, ts, hash), and keeping
-- them means a dropped (session_id, seq) or event_id can never be written again, with
-- any ts. They are the tombstones that make the cut provable from both sides.

-- Windows per tenant, set by an admin (as the owner, tenant set). No row: the
-- caller's default window applies, and with no default the tenant is never dropped.
CREATE TABLE retention_policies (
  tenant text        PRIMARY KEY CHECK (tenant <> ''),
  keep   interval    NOT NULL CHECK (keep > interval '0'),
  set_by text,
  set_at timestamptz DEFAULT now()
);

CREATE TABLE retention_log (
  id             bigserial   PRIMARY KEY,
  partition_name text        NOT NULL,
  range_from     timestamptz NOT NULL,
  range_to       timestamptz NOT NULL,
  event_count    bigint      NOT NULL,
  -- Per session in the dropped range, its last event there: [{tenant, session_id, seq, hash}].
  chain_heads    jsonb       NOT NULL,
  -- Per tenant present, the window that allowed the drop: {tenant: keep}.
  tenant_windows jsonb       NOT NULL,
  dropped_by     text        NOT NULL,
  dropped_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER retention_log_refuse_change BEFORE UPDATE OR DELETE ON retention_log
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER retention_log_refuse_truncate BEFORE TRUNCATE ON retention_log
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
ALTER TABLE retention_log ENABLE ALWAYS TRIGGER retention_log_refuse_change;
ALTER TABLE retention_log ENABLE ALWAYS TRIGGER retention_log_refuse_truncate;

-- Retention must see every tenant's rows, but FORCE RLS binds the owner and
-- `SET row_security = off` then raises instead of bypassing. So the owner (that is,
-- the SECURITY DEFINER functions below) may read all rows, but only inside a session
-- that logged in as wakeline_maintenance; only superusers can fake session_user. Grant
-- wakeline_maintenance nothing else that runs as the owner.
CREATE POLICY retention_scan ON events FOR SELECT TO wakeline_owner
  USING (session_user = 'wakeline_maintenance');

ALTER TABLE retention_policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE retention_policies FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON retention_policies
  USING (tenant = current_setting('wakeline.tenant', true))
  WITH CHECK (tenant = current_setting('wakeline.tenant', true));
CREATE POLICY retention_scan ON retention_policies FOR SELECT
  TO wakeline_owner, wakeline_maintenance
  USING (session_user = 'wakeline_maintenance');

-- The functions below trust the retention_scan policies; anywhere else they would see
-- no rows and take a full partition for an empty one.
CREATE FUNCTION require_maintenance_session() RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF session_user <> 'wakeline_maintenance' THEN
    RAISE EXCEPTION 'wakeline: retention runs only as wakeline_maintenance, not %', session_user
      USING ERRCODE = 'insufficient_privilege';
  END IF;
END $$;

CREATE FUNCTION events_partition_bounds(part regclass, OUT range_from timestamptz,
                                        OUT range_to timestamptz)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  m text[];
BEGIN
  SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid),
                      '^FOR VALUES FROM \(''([^'']+)''\) TO \(''([^'']+)''\)$')
    INTO m
    FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid
   WHERE c.oid = part AND i.inhparent = 'public.events'::regclass;
  IF m IS NULL THEN
    RAISE EXCEPTION 'wakeline: % is not a bounded range partition of events', part
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  range_from := m[1]::timestamptz;
  range_to := m[2]::timestamptz;
END $$;

-- Each tenant with rows in [range_from, range_to), and its window (NULL: none applies).
CREATE FUNCTION events_tenant_windows(range_from timestamptz, range_to timestamptz,
                                      default_keep interval)
RETURNS TABLE (tenant text, keep interval)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT t.tenant, coalesce(p.keep, default_keep)
    FROM (SELECT DISTINCT e.tenant FROM public.events e
           WHERE e.ts >= range_from AND e.ts < range_to) t
    LEFT JOIN public.retention_policies p ON p.tenant = t.tenant
   ORDER BY t.tenant
$$;

-- The tenants that keep [range_from, range_to) alive at `cut`; empty means droppable.
CREATE FUNCTION events_retention_blockers(range_from timestamptz, range_to timestamptz,
                                          cut timestamptz, default_keep interval)
RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(array_agg(w.tenant ORDER BY w.tenant), '{}')
    FROM public.events_tenant_windows(range_from, range_to, default_keep) w
   WHERE w.keep IS NULL OR range_to > cut - w.keep
$$;

CREATE FUNCTION check_default_keep(default_keep interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF default_keep <= interval '0' THEN
    RAISE EXCEPTION 'wakeline: default window must be positive, got %', default_keep
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END $$;

-- Every partition entirely before `as_of` (never later than now(): a caller cannot move
-- the clock forward), with the tenants still inside their window. Read-only.
CREATE FUNCTION events_retention_candidates(as_of timestamptz, default_keep interval DEFAULT NULL)
RETURNS TABLE (partition_name text, range_from timestamptz, range_to timestamptz,
               blocking_tenants text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  cut timestamptz := least(as_of, now());
  part record;
BEGIN
  PERFORM public.require_maintenance_session();
  PERFORM public.check_default_keep(default_keep);
  FOR part IN SELECT c.relname::text AS name, b.range_from AS lo, b.range_to AS hi
                FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
               CROSS JOIN LATERAL public.events_partition_bounds(c.oid) b
               WHERE i.inhparent = 'public.events'::regclass AND b.range_to <= cut
               ORDER BY b.range_from LOOP
    partition_name := part.name;
    range_from := part.lo;
    range_to := part.hi;
    blocking_tenants := public.events_retention_blockers(part.lo, part.hi, cut, default_keep);
    RETURN NEXT;
  END LOOP;
END $$;

-- Checks, records and drops one partition, all in the caller's transaction. The
-- checks are the same as events_retention_candidates', re-done under the lock.
-- DETACH holds ACCESS EXCLUSIVE on events until commit, so it comes last; while it
-- waits (behind a long audit export, say) every new reader and writer queues behind
-- it, hence lock_timeout: better to fail and retry next run than to stall the log.
CREATE FUNCTION drop_events_partition(part_name text, as_of timestamptz,
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
                                                       'seq', h.seq, 'hash', h.hash)
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

-- Default privileges (0001) already keep these from PUBLIC; said again where it matters.
REVOKE EXECUTE ON FUNCTION events_retention_candidates(timestamptz, interval),
                           drop_events_partition(text, timestamptz, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION events_retention_candidates(timestamptz, interval),
                          drop_events_partition(text, timestamptz, interval) TO wakeline_maintenance;
GRANT SELECT ON retention_policies TO wakeline_service, wakeline_maintenance;
GRANT SELECT ON retention_log TO wakeline_maintenance;
