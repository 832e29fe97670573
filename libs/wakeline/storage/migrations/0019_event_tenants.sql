-- 0019: the tenants that have events, for the signer (issue 16).
--
-- The signer checkpoints every tenant unless told which; RLS hides other tenants' rows
-- from the service role, so it asks this definer function. As in 0009 the permissive
-- policy below admits the owner's read of event_keys only while the function has set
-- `wakeline.tenant_list`, and the function returns the tenant names alone, never a row.
-- A skip scan down event_keys_tenant_session_seq (0018): one index probe per tenant.
CREATE POLICY tenant_list ON event_keys FOR SELECT TO wakeline_owner
  USING (current_setting('wakeline.tenant_list', true) = 'on');

CREATE FUNCTION event_tenants() RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM set_config('wakeline.tenant_list', 'on', true);
  RETURN QUERY
    WITH RECURSIVE t AS (
      (SELECT k.tenant FROM public.event_keys k ORDER BY k.tenant LIMIT 1)
      UNION ALL
      SELECT (SELECT k.tenant FROM public.event_keys k WHERE k.tenant > t.tenant ORDER BY k.tenant LIMIT 1)
        FROM t WHERE t.tenant IS NOT NULL)
    SELECT t.tenant FROM t WHERE t.tenant IS NOT NULL;
  PERFORM set_config('wakeline.tenant_list', '', true);
END $$;
REVOKE EXECUTE ON FUNCTION event_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION event_tenants() TO wakeline_service;
