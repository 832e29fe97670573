-- 0026: quotas per tenant (issue 34). A tenant's admin sets its quotas through the gateway
-- (PUT /v1/quotas) and every change is kept, who and when, the values before and after.
-- The gateway admits commands against the rate quotas by counting them here, where every
-- gateway replica sees the same count.

-- The current values, one row per tenant. A NULL quota means "the gateway's default"
-- (GatewaySettings.quota_*). Replaced, never removed, like retention_policies: a row that
-- disappeared would silently mean "the defaults".
CREATE TABLE tenant_quotas (
  tenant               text        PRIMARY KEY CHECK (tenant <> ''),
  running_sessions     integer     CHECK (running_sessions > 0),
  sessions_per_minute  integer     CHECK (sessions_per_minute > 0),
  commands_per_second  integer     CHECK (commands_per_second > 0),
  tool_calls_in_flight integer     CHECK (tool_calls_in_flight > 0),
  tokens_per_day       bigint      CHECK (tokens_per_day > 0),
  set_by               text        NOT NULL,
  set_at               timestamptz NOT NULL DEFAULT now()
);
SELECT wakeline_tenant_scoped('tenant_quotas');
CREATE TRIGGER tenant_quotas_refuse_delete BEFORE DELETE OR TRUNCATE ON tenant_quotas
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
ALTER TABLE tenant_quotas ENABLE ALWAYS TRIGGER tenant_quotas_refuse_delete;

-- Every change: the quotas before (NULL for the first) and after, as JSON objects of the
-- quota columns, so a quota added later is recorded without touching the trigger.
CREATE TABLE tenant_quota_changes (
  id     bigserial   PRIMARY KEY,
  tenant text        NOT NULL CHECK (tenant <> ''),
  old    jsonb,
  new    jsonb       NOT NULL,
  set_by text        NOT NULL,
  set_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX tenant_quota_changes_tenant ON tenant_quota_changes (tenant, id);
SELECT wakeline_append_only('tenant_quota_changes');
SELECT wakeline_tenant_scoped('tenant_quota_changes');

-- SECURITY DEFINER so the writer needs no INSERT on the history; the row's tenant is the
-- quota row's, which already passed RLS's WITH CHECK (0008's recipe).
CREATE FUNCTION record_tenant_quotas() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  bookkeeping CONSTANT text[] := '{tenant,set_by,set_at}';
BEGIN
  INSERT INTO public.tenant_quota_changes (tenant, old, new, set_by)
  VALUES (NEW.tenant, CASE WHEN TG_OP = 'UPDATE' THEN to_jsonb(OLD) - bookkeeping END,
          to_jsonb(NEW) - bookkeeping, NEW.set_by);
  RETURN NULL;
END $$;
REVOKE EXECUTE ON FUNCTION record_tenant_quotas() FROM PUBLIC;
CREATE TRIGGER tenant_quotas_history AFTER INSERT OR UPDATE ON tenant_quotas
  FOR EACH ROW EXECUTE FUNCTION record_tenant_quotas();
ALTER TABLE tenant_quotas ENABLE ALWAYS TRIGGER tenant_quotas_history;

-- Commands counted per tenant, quota and window. Coordination, not history (like
-- tool_call_leases): a row is bumped in place on every admitted command and deleted two
-- windows on. UNLOGGED: a count is worth nothing after a crash (the window it counts is
-- long over by the time Postgres is back), and an unlogged bump writes no WAL.
-- fillfactor 50 leaves room on each page for the bumps to be HOT updates.
CREATE UNLOGGED TABLE quota_counters (
  tenant       text        NOT NULL CHECK (tenant <> ''),
  quota        text        NOT NULL,
  window_start timestamptz NOT NULL,
  n            integer     NOT NULL CHECK (n >= 0),
  PRIMARY KEY (tenant, quota, window_start)
) WITH (fillfactor = 50);
SELECT wakeline_tenant_scoped('quota_counters');

-- Admission in one round trip: called alone, this statement is its own transaction. It
-- sets the tenant transaction-locally (as session_row, 0015), so row-level security
-- decides what it reads and writes. For each quota named, in order, the limit is the
-- tenant's own value or else the caller's default (both NULL: not counted). The count is
-- a sliding-window estimate: this window's count plus the previous window's, weighted by
-- how much of it still lies within one window of now. One more is counted when the
-- estimate stays within the limit; the bump is conditional on the locked row, so
-- concurrent gateways cannot both take the last unit. A refusal gives back what the
-- earlier quotas took and returns one row (the quota, its limit, the two counts, the
-- window and how far into it now is); an admission returns no row. The first command of
-- a window deletes the tenant's windows before the previous one.
CREATE FUNCTION admit_quotas(p_tenant text, p_quotas text[], p_windows_s integer[], p_defaults bigint[])
RETURNS TABLE (refused text, refused_limit bigint, previous_n integer, current_n integer,
               window_seconds integer, window_elapsed double precision)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  now_s CONSTANT numeric := extract(epoch FROM now());
  own jsonb;
  q text;
  w integer;
  lim bigint;
  starts timestamptz;
  fraction double precision;
  prev_n integer;
  counted integer;
  taken text[] := '{}';
  taken_at timestamptz[] := '{}';
BEGIN
  IF coalesce(p_tenant, '') = '' THEN
    RAISE EXCEPTION 'admit_quotas: a tenant is required';
  END IF;
  PERFORM set_config('wakeline.tenant', p_tenant, true);
  SELECT to_jsonb(t) INTO own FROM public.tenant_quotas t WHERE t.tenant = p_tenant;
  FOR i IN 1 .. coalesce(array_length(p_quotas, 1), 0) LOOP
    q := p_quotas[i];
    w := p_windows_s[i];
    lim := coalesce((own ->> q)::bigint, p_defaults[i]);
    CONTINUE WHEN lim IS NULL;
    starts := to_timestamp((floor(now_s / w) * w)::double precision);
    fraction := ((now_s - floor(now_s / w) * w) / w)::double precision;
    SELECT c.n INTO prev_n FROM public.quota_counters c
     WHERE c.tenant = p_tenant AND c.quota = q AND c.window_start = starts - make_interval(secs => w);
    prev_n := coalesce(prev_n, 0);
    counted := NULL;
    INSERT INTO public.quota_counters AS c (tenant, quota, window_start, n)
      SELECT p_tenant, q, starts, 1 WHERE prev_n * (1 - fraction) + 1 <= lim
      ON CONFLICT (tenant, quota, window_start) DO UPDATE SET n = c.n + 1
      WHERE prev_n * (1 - fraction) + c.n + 1 <= lim
      RETURNING c.n INTO counted;
    IF counted IS NULL THEN
      UPDATE public.quota_counters c SET n = c.n - 1
        FROM unnest(taken, taken_at) AS t(quota, window_start)
       WHERE c.tenant = p_tenant AND c.quota = t.quota AND c.window_start = t.window_start;
      RETURN QUERY
        SELECT q, lim, prev_n, coalesce((SELECT c.n FROM public.quota_counters c WHERE c.tenant = p_tenant
                                          AND c.quota = q AND c.window_start = starts), 0), w, fraction;
      RETURN;
    END IF;
    IF counted = 1 THEN
      DELETE FROM public.quota_counters c
       WHERE c.tenant = p_tenant AND c.quota = q AND c.window_start < starts - make_interval(secs => w);
    END IF;
    taken := taken || q;
    taken_at := taken_at || starts;
  END LOOP;
END $$;
REVOKE EXECUTE ON FUNCTION admit_quotas(text, text[], integer[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION admit_quotas(text, text[], integer[], bigint[]) TO wakeline_service;

GRANT SELECT, INSERT, UPDATE ON tenant_quotas TO wakeline_service;
GRANT SELECT ON tenant_quota_changes TO wakeline_service;
GRANT SELECT, INSERT, UPDATE, DELETE ON quota_counters TO wakeline_service;
