-- 0021: a request's API key and the session its path names, in one round trip (issue 10).
--
-- Every session route authenticated the key (api_key_lookup) and then read the session
-- (session_row): two statements, two wake-ups of this backend and of the gateway, before
-- the command was even sent. This function does both in one statement. It decides nothing
-- the gateway did not: it returns the stored key (the gateway still compares the secret's
-- hash in constant time and refuses a revoked key, discarding the session with it), and it
-- reads the session through session_row under the scope the key gives (tenant, and for a
-- `user` the viewer `user:<principal>`, as auth.Caller.scope), so row-level security
-- decides what is seen exactly as before. No key, no row. SECURITY INVOKER: api_key_lookup
-- is the definer function the service role already calls, and nothing else is bypassed.
CREATE FUNCTION key_and_session(p_key_id text, p_session_id text)
RETURNS TABLE (tenant text, principal text, role text, secret_hash text, revoked boolean,
               session_id text, owner text, title text, model text, status text, last_seq bigint,
               created_at timestamptz, updated_at timestamptz, ended_reason text,
               parent_session_id text, fork_seq bigint, deleted_at timestamptz, deleted_by text)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  k record;
BEGIN
  SELECT l.tenant, l.principal, l.role, l.secret_hash, l.revoked INTO k
    FROM public.api_key_lookup(p_key_id) l;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT k.tenant, k.principal, k.role, k.secret_hash, k.revoked,
           s.session_id, s.owner, s.title, s.model, s.status, s.last_seq, s.created_at, s.updated_at,
           s.ended_reason, s.parent_session_id, s.fork_seq, s.deleted_at, s.deleted_by
      FROM (SELECT 1) AS one
      LEFT JOIN public.session_row(k.tenant, CASE WHEN k.role = 'user' THEN 'user:' || k.principal ELSE '' END,
                                   p_session_id) AS s ON true;
END $$;
REVOKE EXECUTE ON FUNCTION key_and_session(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION key_and_session(text, text) TO wakeline_service;
