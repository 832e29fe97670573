-- 0028: the tokens each tenant's model calls used per UTC day (issue 34, tokens_per_day).
-- Every brain adds each model call's tokens here after the call and reads the day's total
-- before a call, so a tenant's daily quota holds across its sessions on every brain.

-- One row per tenant and day, bumped in place. Logged (unlike quota_counters): a day's count
-- is still in force after a crash, and the rows are what each tenant's models used, day by day.
-- fillfactor 50 leaves room on each page for the bumps to be HOT updates.
CREATE TABLE tenant_token_days (
  tenant text   NOT NULL CHECK (tenant <> ''),
  day    date   NOT NULL,
  tokens bigint NOT NULL CHECK (tokens >= 0),
  PRIMARY KEY (tenant, day)
) WITH (fillfactor = 50);
SELECT wakeline_tenant_scoped('tenant_token_days');

-- Add and read in one round trip: called alone, this statement is its own transaction. It
-- sets the tenant transaction-locally (as admit_quotas, 0026), so row-level security decides
-- what it reads and writes. The day is the database's UTC date, one clock for every brain.
-- p_tokens 0 only reads. Returns the day, its total after the add, and the tenant's own
-- tokens_per_day and tool_calls_in_flight (NULL: the caller's default applies), so the
-- caller learns a raised quota in the same round trip.
CREATE FUNCTION count_tenant_tokens(p_tenant text, p_tokens bigint)
RETURNS TABLE (day date, used bigint, tokens_per_day bigint, tool_calls_in_flight integer)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
  today CONSTANT date := (now() AT TIME ZONE 'UTC')::date;
  total bigint;
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
  RETURN QUERY
    SELECT today, coalesce(total, 0), q.tokens_per_day, q.tool_calls_in_flight
      FROM (SELECT 1) one LEFT JOIN public.tenant_quotas q ON q.tenant = p_tenant;
END $$;
REVOKE EXECUTE ON FUNCTION count_tenant_tokens(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION count_tenant_tokens(text, bigint) TO wakeline_service;

GRANT SELECT, INSERT, UPDATE ON tenant_token_days TO wakeline_service;
