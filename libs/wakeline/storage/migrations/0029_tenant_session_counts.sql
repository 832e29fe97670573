-- 0029: open sessions per tenant and status, for the gateway's metrics (issue 34, item 6).
--
-- `wakeline_tenant_sessions` shows every tenant's running (and, once they exist, queued)
-- sessions. RLS hides other tenants' rows from the service role, so the gateway asks this
-- definer function, which returns counts alone, never a row: as in 0019, the permissive
-- policy below admits the owner's read of sessions only while the function has set
-- `wakeline.session_counts`. Ended and deleted sessions are left out: they only accumulate.
-- Every status value present is counted, whatever new ones the projection learns.
-- No index: one scan of the projection per sample (every 15 s by default; 4 ms at 13k rows).
CREATE POLICY session_counts ON sessions FOR SELECT TO wakeline_owner
  USING (current_setting('wakeline.session_counts', true) = 'on');

CREATE FUNCTION tenant_session_counts() RETURNS TABLE (tenant text, status text, sessions bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM set_config('wakeline.session_counts', 'on', true);
  RETURN QUERY
    SELECT s.tenant, s.status, count(*) FROM public.sessions s
     WHERE s.status NOT IN ('ended', 'deleted') GROUP BY s.tenant, s.status;
  PERFORM set_config('wakeline.session_counts', '', true);
END $$;
REVOKE EXECUTE ON FUNCTION tenant_session_counts() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tenant_session_counts() TO wakeline_service;
