-- A session id names one session across all tenants (event_keys' primary key is
-- (session_id, seq)). The brain must know which tenant owns a session before it
-- sequences an input for it: an input claiming another tenant is refused, never
-- sequenced as a second history under the same id. RLS hides other tenants' rows from
-- the service role, so it asks this definer function, which sees only the one row it
-- is asked about: the permissive policy below admits the owner's read of exactly the
-- session id the function put in `wakeline.owner_lookup`, and nothing else.
CREATE POLICY owner_lookup ON event_keys FOR SELECT TO wakeline_owner
  USING (session_id = current_setting('wakeline.owner_lookup', true));

CREATE FUNCTION session_tenant(lookup_session_id text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  found text;
BEGIN
  PERFORM set_config('wakeline.owner_lookup', lookup_session_id, true);
  SELECT k.tenant INTO found FROM public.event_keys k WHERE k.session_id = lookup_session_id
   ORDER BY k.seq LIMIT 1;
  PERFORM set_config('wakeline.owner_lookup', '', true);
  RETURN found;
END $$;
REVOKE EXECUTE ON FUNCTION session_tenant(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION session_tenant(text) TO wakeline_service;
