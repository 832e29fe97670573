-- The gateway's most frequent read in one round trip (issue 10). Every session route
-- reads the session's projection row first; as a transaction that was BEGIN, the
-- tenant/viewer set_config, the SELECT and COMMIT: four round trips, each a wake-up of
-- this backend and of the gateway. Called alone, this function is its own transaction:
-- it sets the scope transaction-locally, so row-level security (tenant_isolation,
-- viewer_owns) decides what the SELECT sees exactly as in TenantPool.transaction, and the
-- settings are gone when the statement ends. SECURITY INVOKER: it reads with the
-- caller's rights, and bypasses nothing.
CREATE FUNCTION session_row(p_tenant text, p_viewer text, p_session_id text)
RETURNS TABLE (session_id text, owner text, title text, model text, status text, last_seq bigint,
               created_at timestamptz, updated_at timestamptz, ended_reason text,
               parent_session_id text, fork_seq bigint, deleted_at timestamptz, deleted_by text)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF coalesce(p_tenant, '') = '' THEN
    RAISE EXCEPTION 'session_row: a tenant is required';
  END IF;
  PERFORM set_config('wakeline.tenant', p_tenant, true), set_config('wakeline.viewer', coalesce(p_viewer, ''), true);
  RETURN QUERY
    SELECT s.session_id, s.owner, s.title, s.model, s.status, s.last_seq, s.created_at, s.updated_at,
           s.ended_reason, s.parent_session_id, s.fork_seq, s.deleted_at, s.deleted_by
      FROM public.sessions s WHERE s.session_id = p_session_id;
END $$;
REVOKE EXECUTE ON FUNCTION session_row(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION session_row(text, text, text) TO wakeline_service;
