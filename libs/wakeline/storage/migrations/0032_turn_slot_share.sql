-- 0032: a fair share of the deployment's sessions at work across tenants (issue 34). 0027's
-- slots hold each tenant to its own running-sessions quota only, so a tenant running 20 beside
-- another's 10 took two thirds of a machine both saturate, and every step of the other tenant
-- waited behind its steps. With `p_total` (the brains' `WAKELINE_RUNNING_SESSIONS_TOTAL`): while
-- more than one tenant holds or waits for a slot, a tenant is held to the larger of an equal
-- share of p_total and what the others leave of it (never less than one), under its own quota
-- as before. A tenant alone is held to its quota only, so p_total is where sharing begins, not a
-- ceiling. A session keeps its slot from one turn to its next (0027), so the share is also
-- asked where a session holding a slot starts its next turn, by the brain when its tenant was
-- over its share at the last look (`turn_slot_standing`, at most every second or so per tenant):
-- `yield_turn_slot` then moves it to the back of its tenant's queue, and it waits `queued` like
-- any turn past the limit. Nothing is cut short: a turn under way runs to its end. The tenant's
-- queue is promoted by its own turns' ends as the share allows (and by the sweep, as before).
--
-- The counts across tenants are read without their locks (each tenant's slots stay serialized
-- on its own lock): a share decided on a count a moment old is off by the sessions that moved
-- meanwhile, which the next take or release puts right. The three-argument functions stay for a
-- brain of before this migration, as the same with no total.

CREATE FUNCTION turn_slot_share(p_tenant text, p_limit integer, p_total integer) RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  tenants integer;
  others integer;
  share integer;
BEGIN
  IF p_total IS NULL THEN
    RETURN p_limit;
  END IF;
  SELECT count(*) INTO tenants FROM (
    SELECT s.tenant FROM public.turn_slots s UNION SELECT q.tenant FROM public.turn_queue q UNION SELECT p_tenant) t;
  IF tenants < 2 THEN
    RETURN p_limit;
  END IF;
  SELECT count(*) INTO others FROM public.turn_slots s WHERE s.tenant <> p_tenant;
  share := greatest(ceil(p_total::numeric / tenants)::integer, p_total - others, 1);
  RETURN CASE WHEN p_limit IS NULL THEN share ELSE least(p_limit, share) END;
END $$;

CREATE FUNCTION take_turn_slot(p_tenant text, p_session text, p_default integer, p_total integer)
RETURNS TABLE (granted boolean, running integer, slot_limit integer, woken text[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  lim integer;
  promoted text[];
  n integer;
BEGIN
  IF coalesce(p_tenant, '') = '' OR coalesce(p_session, '') = '' THEN
    RAISE EXCEPTION 'take_turn_slot: a tenant and a session are required';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('wakeline.turn_slots:' || p_tenant, 0));
  lim := public.turn_slot_share(p_tenant, public.turn_slot_limit(p_tenant, p_default), p_total);
  UPDATE public.turn_slots s SET started = true WHERE s.session_id = p_session AND s.tenant = p_tenant;
  IF NOT FOUND THEN
    promoted := public.turn_slots_promote(p_tenant, lim);
    IF p_session = ANY (promoted) THEN
      UPDATE public.turn_slots s SET started = true WHERE s.session_id = p_session;
      promoted := array_remove(promoted, p_session);
    ELSE
      SELECT count(*) INTO n FROM public.turn_slots s WHERE s.tenant = p_tenant;
      IF (lim IS NULL OR n < lim) AND NOT EXISTS (SELECT 1 FROM public.turn_queue q WHERE q.tenant = p_tenant) THEN
        INSERT INTO public.turn_slots (session_id, tenant, started) VALUES (p_session, p_tenant, true);
      ELSE
        INSERT INTO public.turn_queue (tenant, session_id) VALUES (p_tenant, p_session)
          ON CONFLICT (session_id) DO NOTHING;
        RETURN QUERY SELECT false, n, lim, promoted;
        RETURN;
      END IF;
    END IF;
  ELSE
    promoted := '{}';
  END IF;
  SELECT count(*) INTO n FROM public.turn_slots s WHERE s.tenant = p_tenant;
  RETURN QUERY SELECT true, n, lim, promoted;
END $$;

CREATE FUNCTION release_turn_slot(p_tenant text, p_session text, p_default integer, p_total integer)
RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('wakeline.turn_slots:' || p_tenant, 0));
  DELETE FROM public.turn_slots s WHERE s.session_id = p_session AND s.tenant = p_tenant;
  DELETE FROM public.turn_queue q WHERE q.session_id = p_session AND q.tenant = p_tenant;
  RETURN public.turn_slots_promote(p_tenant,
                                   public.turn_slot_share(p_tenant, public.turn_slot_limit(p_tenant, p_default), p_total));
END $$;

CREATE FUNCTION sweep_turn_slots(p_default integer, p_stale_s double precision, p_wake_s double precision,
                                 p_total integer)
RETURNS TABLE (tenant text, session_id text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  t text;
  stale CONSTANT timestamptz := clock_timestamp() - make_interval(secs => p_stale_s);
  fresh text[];
BEGIN
  FOR t IN SELECT DISTINCT s.tenant FROM public.turn_slots s UNION SELECT DISTINCT q.tenant FROM public.turn_queue q
  LOOP
    PERFORM pg_advisory_xact_lock(hashtextextended('wakeline.turn_slots:' || t, 0));
    PERFORM set_config('wakeline.tenant', t, true);  -- `sessions` is the tenant's only
    DELETE FROM public.turn_slots s USING public.sessions x
     WHERE s.tenant = t AND s.started AND s.granted_at < stale AND x.session_id = s.session_id
       AND x.status NOT IN ('running', 'waiting_model', 'waiting_client', 'queued') AND x.updated_at < stale;
    DELETE FROM public.turn_queue q USING public.sessions x
     WHERE q.tenant = t AND q.queued_at < stale AND x.session_id = q.session_id
       AND x.status <> 'queued' AND x.updated_at < stale;
    fresh := public.turn_slots_promote(t, public.turn_slot_share(t, public.turn_slot_limit(t, p_default), p_total));
    RETURN QUERY SELECT t, s.session_id FROM public.turn_slots s
      WHERE s.tenant = t AND NOT s.started
        AND (s.session_id = ANY (fresh) OR s.granted_at < clock_timestamp() - make_interval(secs => p_wake_s));
  END LOOP;
END $$;

-- A session holding a slot, about to start its next turn: keeps it (granted) unless its tenant
-- holds more than its limit now, in which case the slot goes and the session joins the back of
-- its tenant's queue (granted false). A session holding none is answered as take_turn_slot would.
CREATE FUNCTION yield_turn_slot(p_tenant text, p_session text, p_default integer, p_total integer)
RETURNS TABLE (granted boolean, running integer, slot_limit integer, woken text[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  lim integer;
  n integer;
BEGIN
  IF coalesce(p_tenant, '') = '' OR coalesce(p_session, '') = '' THEN
    RAISE EXCEPTION 'yield_turn_slot: a tenant and a session are required';
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('wakeline.turn_slots:' || p_tenant, 0));
  IF NOT EXISTS (SELECT 1 FROM public.turn_slots s WHERE s.session_id = p_session AND s.tenant = p_tenant) THEN
    RETURN QUERY SELECT * FROM public.take_turn_slot(p_tenant, p_session, p_default, p_total);
    RETURN;
  END IF;
  lim := public.turn_slot_share(p_tenant, public.turn_slot_limit(p_tenant, p_default), p_total);
  SELECT count(*) INTO n FROM public.turn_slots s WHERE s.tenant = p_tenant;
  IF lim IS NULL OR n <= lim THEN
    RETURN QUERY SELECT true, n, lim, '{}'::text[];
    RETURN;
  END IF;
  DELETE FROM public.turn_slots s WHERE s.session_id = p_session AND s.tenant = p_tenant;
  INSERT INTO public.turn_queue (tenant, session_id) VALUES (p_tenant, p_session) ON CONFLICT (session_id) DO NOTHING;
  RETURN QUERY SELECT false, n - 1, lim, '{}'::text[];
END $$;

-- What the tenant holds and may hold now: the brain's look at whether it is over its share.
CREATE FUNCTION turn_slot_standing(p_tenant text, p_default integer, p_total integer)
RETURNS TABLE (running integer, slot_limit integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT (SELECT count(*) FROM public.turn_slots s WHERE s.tenant = p_tenant)::integer,
         public.turn_slot_share(p_tenant, public.turn_slot_limit(p_tenant, p_default), p_total)
$$;

-- The three-argument forms: the same, with no total.
CREATE OR REPLACE FUNCTION take_turn_slot(p_tenant text, p_session text, p_default integer)
RETURNS TABLE (granted boolean, running integer, slot_limit integer, woken text[])
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT * FROM public.take_turn_slot(p_tenant, p_session, p_default, NULL)
$$;

CREATE OR REPLACE FUNCTION release_turn_slot(p_tenant text, p_session text, p_default integer) RETURNS text[]
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT public.release_turn_slot(p_tenant, p_session, p_default, NULL)
$$;

CREATE OR REPLACE FUNCTION sweep_turn_slots(p_default integer, p_stale_s double precision, p_wake_s double precision)
RETURNS TABLE (tenant text, session_id text)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT * FROM public.sweep_turn_slots(p_default, p_stale_s, p_wake_s, NULL)
$$;

REVOKE EXECUTE ON FUNCTION turn_slot_share(text, integer, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION take_turn_slot(text, text, integer, integer), release_turn_slot(text, text, integer, integer),
  sweep_turn_slots(integer, double precision, double precision, integer),
  yield_turn_slot(text, text, integer, integer), turn_slot_standing(text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION take_turn_slot(text, text, integer, integer), release_turn_slot(text, text, integer, integer),
  sweep_turn_slots(integer, double precision, double precision, integer),
  yield_turn_slot(text, text, integer, integer), turn_slot_standing(text, integer, integer) TO wakeline_service;
