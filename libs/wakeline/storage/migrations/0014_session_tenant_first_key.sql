-- Waking a long session spent its time here, not in its events (issue 10): for a session
-- of 100k events `session_tenant` took 40-65 ms, two thirds of the wake. With the
-- row-level-security filter the planner expects one matching key and ~200 candidates,
-- so it read every key of the session (a bitmap heap scan) and sorted them for the first;
-- the cost grew with the session's length. A session's first key is seq 1 (keys are never
-- removed, not even by retention: 0004), so that row is read by its primary key first; the
-- old query remains for a session that has no seq 1, which finds nothing quickly.
CREATE OR REPLACE FUNCTION session_tenant(lookup_session_id text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  owner_tenant text;
BEGIN
  PERFORM set_config('wakeline.owner_lookup', lookup_session_id, true);
  SELECT k.tenant INTO owner_tenant FROM public.event_keys k WHERE k.session_id = lookup_session_id AND k.seq = 1;
  IF NOT FOUND THEN
    SELECT k.tenant INTO owner_tenant FROM public.event_keys k WHERE k.session_id = lookup_session_id
     ORDER BY k.seq LIMIT 1;
  END IF;
  PERFORM set_config('wakeline.owner_lookup', '', true);
  RETURN owner_tenant;
END $$;
