-- 0030: the operator's ceiling on each tenant's quotas (issue 34). A tenant's admin sets its
-- own quotas (0026), but only below a ceiling it cannot lift: the operator's value for the
-- tenant, set here as the schema owner (`wakeline quotas ceiling`), else the service's default
-- (WAKELINE_QUOTA_*). What applies is the lower of the tenant's own value and the ceiling:
-- `tenant_quota_limits` below, the one place every quota's limit is resolved.

-- The current ceilings, one row per tenant. A NULL ceiling means "the default is the ceiling".
-- Replaced, never removed (as tenant_quotas): a row that disappeared would silently mean "the
-- defaults". The service role may only read it; nobody but the owner writes it.
CREATE TABLE tenant_quota_ceilings (
  tenant               text        PRIMARY KEY CHECK (tenant <> ''),
  running_sessions     integer     CHECK (running_sessions > 0),
  sessions_per_minute  integer     CHECK (sessions_per_minute > 0),
  commands_per_second  integer     CHECK (commands_per_second > 0),
  tool_calls_in_flight integer     CHECK (tool_calls_in_flight > 0),
  tokens_per_day       bigint      CHECK (tokens_per_day > 0),
  set_by               text        NOT NULL,
  set_at               timestamptz NOT NULL DEFAULT now()
);
SELECT wakeline_tenant_scoped('tenant_quota_ceilings');
CREATE TRIGGER tenant_quota_ceilings_refuse_delete BEFORE DELETE OR TRUNCATE ON tenant_quota_ceilings
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
ALTER TABLE tenant_quota_ceilings ENABLE ALWAYS TRIGGER tenant_quota_ceilings_refuse_delete;

-- Every change, as tenant_quota_changes (0026): the ceilings before (NULL for the first) and
-- after, as JSON objects of the quota columns.
CREATE TABLE tenant_quota_ceiling_changes (
  id     bigserial   PRIMARY KEY,
  tenant text        NOT NULL CHECK (tenant <> ''),
  old    jsonb,
  new    jsonb       NOT NULL,
  set_by text        NOT NULL,
  set_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX tenant_quota_ceiling_changes_tenant ON tenant_quota_ceiling_changes (tenant, id);
SELECT wakeline_append_only('tenant_quota_ceiling_changes');
SELECT wakeline_tenant_scoped('tenant_quota_ceiling_changes');

CREATE FUNCTION record_tenant_quota_ceilings() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  bookkeeping CONSTANT text[] := '{tenant,set_by,set_at}';
BEGIN
  INSERT INTO public.tenant_quota_ceiling_changes (tenant, old, new, set_by)
  VALUES (NEW.tenant, CASE WHEN TG_OP = 'UPDATE' THEN to_jsonb(OLD) - bookkeeping END,
          to_jsonb(NEW) - bookkeeping, NEW.set_by);
  RETURN NULL;
END $$;
REVOKE EXECUTE ON FUNCTION record_tenant_quota_ceilings() FROM PUBLIC;
CREATE TRIGGER tenant_quota_ceilings_history AFTER INSERT OR UPDATE ON tenant_quota_ceilings
  FOR EACH ROW EXECUTE FUNCTION record_tenant_quota_ceilings();
ALTER TABLE tenant_quota_ceilings ENABLE ALWAYS TRIGGER tenant_quota_ceilings_history;

-- Read only: the gateway shows a tenant its ceilings and refuses an own value above one.
GRANT SELECT ON tenant_quota_ceilings, tenant_quota_ceiling_changes TO wakeline_service;

-- The limits that apply to a tenant, for the quotas named, in order: the lower of its own value
-- and its ceiling, the ceiling being the operator's value else the caller's default. least()
-- skips NULLs, so a quota with no own value gets the ceiling, and NULL (unlimited) comes back
-- only when all three are NULL. One statement reads both rows. It sets the tenant
-- transaction-locally, so row-level security decides what it reads, and runs as its caller.
CREATE FUNCTION tenant_quota_limits(p_tenant text, p_quotas text[], p_defaults bigint[]) RETURNS bigint[]
LANGUAGE plpgsql STABLE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  own jsonb;
  cap jsonb;
  limits bigint[] := '{}';
BEGIN
  PERFORM set_config('wakeline.tenant', p_tenant, true);
  SELECT (SELECT to_jsonb(t) FROM public.tenant_quotas t WHERE t.tenant = p_tenant),
         (SELECT to_jsonb(c) FROM public.tenant_quota_ceilings c WHERE c.tenant = p_tenant)
    INTO own, cap;
  FOR i IN 1 .. coalesce(array_length(p_quotas, 1), 0) LOOP
    limits := limits || least((own ->> p_quotas[i])::bigint,
                              coalesce((cap ->> p_quotas[i])::bigint, p_defaults[i]));
  END LOOP;
  RETURN limits;
END $$;
REVOKE EXECUTE ON FUNCTION tenant_quota_limits(text, text[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tenant_quota_limits(text, text[], bigint[]) TO wakeline_service;

-- 0026's admit_quotas, the same but for the limit: tenant_quota_limits, read once.
CREATE OR REPLACE FUNCTION admit_quotas(p_tenant text, p_quotas text[], p_windows_s integer[], p_defaults bigint[])
RETURNS TABLE (refused text, refused_limit bigint, previous_n integer, current_n integer,
               window_seconds integer, window_elapsed double precision)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  now_s CONSTANT numeric := extract(epoch FROM now());
  limits bigint[];
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
  limits := public.tenant_quota_limits(p_tenant, p_quotas, p_defaults);
  FOR i IN 1 .. coalesce(array_length(p_quotas, 1), 0) LOOP
    q := p_quotas[i];
    w := p_windows_s[i];
    lim := limits[i];
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

-- 0027's running-sessions limit, through tenant_quota_limits (take_turn_slot, release_turn_slot
-- and sweep_turn_slots call it and need no change). Runs as the owner (SECURITY DEFINER, as
-- before), which RLS binds too: tenant_quota_limits sets the tenant.
CREATE OR REPLACE FUNCTION turn_slot_limit(p_tenant text, p_default integer) RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN (public.tenant_quota_limits(p_tenant, '{running_sessions}', ARRAY[p_default::bigint]))[1]::integer;
END $$;

-- 0028's count, told the caller's defaults: returns the limits that apply (NULL: unlimited).
CREATE FUNCTION count_tenant_tokens(p_tenant text, p_tokens bigint, p_tokens_per_day bigint,
                                    p_tool_calls_in_flight integer)
RETURNS TABLE (day date, used bigint, tokens_per_day bigint, tool_calls_in_flight integer)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
  today CONSTANT date := (now() AT TIME ZONE 'UTC')::date;
  total bigint;
  limits bigint[];
BEGIN
  IF coalesce(p_tenant, '') = '' THEN
    RAISE EXCEPTION 'count_tenant_tokens: a tenant is required';
  END IF;
  IF p_tokens < 0 THEN
    RAISE EXCEPTION 'count_tenant_tokens: tokens must not be negative (%)', p_tokens;
  END IF;
  PERFORM set_config('wakeline.tenant', p_tenant, true);
  IF p_tokens > 0 THEN
    -- The add need not wait for its WAL flush: a crash loses at most the last moment's counts.
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO public.tenant_token_days AS t (tenant, day, tokens) VALUES (p_tenant, today, p_tokens)
      ON CONFLICT (tenant, day) DO UPDATE SET tokens = t.tokens + EXCLUDED.tokens
      RETURNING t.tokens INTO total;
  ELSE
    SELECT t.tokens INTO total FROM public.tenant_token_days t WHERE t.tenant = p_tenant AND t.day = today;
  END IF;
  limits := public.tenant_quota_limits(p_tenant, '{tokens_per_day,tool_calls_in_flight}',
                                       ARRAY[p_tokens_per_day, p_tool_calls_in_flight::bigint]);
  RETURN QUERY SELECT today, coalesce(total, 0), limits[1], limits[2]::integer;
END $$;
REVOKE EXECUTE ON FUNCTION count_tenant_tokens(text, bigint, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION count_tenant_tokens(text, bigint, bigint, integer) TO wakeline_service;

-- 0028's two-argument count, kept for a brain of before this migration: the tenant's own value
-- under the operator's ceiling (NULL: the caller's default applies). Such a brain still lets an
-- own value above an unset ceiling through; brains of this version call the four-argument form.
CREATE OR REPLACE FUNCTION count_tenant_tokens(p_tenant text, p_tokens bigint)
RETURNS TABLE (day date, used bigint, tokens_per_day bigint, tool_calls_in_flight integer)
LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
  SELECT * FROM public.count_tenant_tokens(p_tenant, p_tokens, NULL, NULL)
$$;
