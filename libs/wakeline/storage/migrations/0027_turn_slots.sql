-- 0027: the running-sessions quota (issue 34). A session in a turn holds one of its tenant's
-- slots; a turn that finds them all taken waits in the tenant's queue (the session records
-- `turn_queued` and shows `queued`) and is granted a slot in arrival order as others end
-- their turns. Every brain takes and gives back slots here, where all of them see the same
-- count: one statement per turn start and one per turn end, never per tool step.
--
-- Coordination, not history (like tool_call_leases): rows come and go. Only the functions
-- below touch these tables (no grant on them to anyone): each takes its tenant explicitly and
-- serializes that tenant's slots on an advisory lock, so two brains can never both take the
-- last slot, and the sweep, which runs for every tenant, needs no row-level exemption.

CREATE TABLE turn_slots (
  session_id text        PRIMARY KEY,
  tenant     text        NOT NULL CHECK (tenant <> ''),
  granted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- false: granted to a queued session in its absence (another session's turn ended); its
  -- brain owes it a wake, which the sweep sends again if it has not started by then.
  started    boolean     NOT NULL
);
CREATE INDEX turn_slots_tenant ON turn_slots (tenant);

CREATE TABLE turn_queue (
  id         bigserial   PRIMARY KEY,  -- arrival order
  tenant     text        NOT NULL CHECK (tenant <> ''),
  session_id text        NOT NULL UNIQUE,
  queued_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX turn_queue_tenant ON turn_queue (tenant, id);

REVOKE ALL ON turn_slots, turn_queue FROM PUBLIC;

-- The tenant's running-sessions quota: its own, else the caller's default (NULL: unlimited).
CREATE FUNCTION turn_slot_limit(p_tenant text, p_default integer) RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  own integer;
BEGIN
  PERFORM set_config('wakeline.tenant', p_tenant, true);
  SELECT q.running_sessions INTO own FROM public.tenant_quotas q WHERE q.tenant = p_tenant;
  RETURN coalesce(own, p_default);
END $$;

-- Grants the heads of the tenant's queue while it has room (a slot given back, a quota
-- raised); returns them: sessions a wake is owed to. The caller holds the tenant's lock.
CREATE FUNCTION turn_slots_promote(p_tenant text, p_limit integer) RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n integer;
  head record;
  woken text[] := '{}';
BEGIN
  SELECT count(*) INTO n FROM public.turn_slots s WHERE s.tenant = p_tenant;
  LOOP
    EXIT WHEN p_limit IS NOT NULL AND n >= p_limit;
    SELECT q.id, q.session_id INTO head FROM public.turn_queue q WHERE q.tenant = p_tenant ORDER BY q.id LIMIT 1;
    EXIT WHEN NOT FOUND;
    DELETE FROM public.turn_queue q WHERE q.id = head.id;
    INSERT INTO public.turn_slots (session_id, tenant, started) VALUES (head.session_id, p_tenant, false)
      ON CONFLICT (session_id) DO NOTHING;
    woken := woken || head.session_id;
    n := n + 1;
  END LOOP;
  RETURN woken;
END $$;

-- A session about to start a turn takes a slot: granted if it holds one already (granted
-- while it was queued, or taken before a crash), or if the tenant has room and nobody queued
-- ahead of it; otherwise it joins the queue (once) behind the others. Returns whether it was
-- granted, the tenant's count and limit, and the sessions granted a slot on the way (a quota
-- raised while they waited) that are owed a wake.
CREATE FUNCTION take_turn_slot(p_tenant text, p_session text, p_default integer)
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
  lim := public.turn_slot_limit(p_tenant, p_default);
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

-- A session whose turn ended (or that ended, or was deleted, while queued) gives its slot
-- back, or leaves the queue; the queue's heads are granted the room. Returns them: the
-- sessions owed a wake.
CREATE FUNCTION release_turn_slot(p_tenant text, p_session text, p_default integer) RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('wakeline.turn_slots:' || p_tenant, 0));
  DELETE FROM public.turn_slots s WHERE s.session_id = p_session AND s.tenant = p_tenant;
  DELETE FROM public.turn_queue q WHERE q.session_id = p_session AND q.tenant = p_tenant;
  RETURN public.turn_slots_promote(p_tenant, public.turn_slot_limit(p_tenant, p_default));
END $$;

-- What a crash can leave behind, put right for every tenant (each brain runs it now and
-- then; at once on several is harmless): a slot or a queue entry of a session the archive
-- shows out of its turn (idle, ended, deleted) for longer than `p_stale_s` — a brain died
-- between a turn's end and giving its slot back — is dropped, the room granted on, and every
-- slot granted in its session's absence longer than `p_wake_s` ago (its wake was lost with a
-- brain) is returned with the newly granted: the sessions owed a wake.
CREATE FUNCTION sweep_turn_slots(p_default integer, p_stale_s double precision, p_wake_s double precision)
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
    fresh := public.turn_slots_promote(t, public.turn_slot_limit(t, p_default));
    RETURN QUERY SELECT t, s.session_id FROM public.turn_slots s
      WHERE s.tenant = t AND NOT s.started
        AND (s.session_id = ANY (fresh) OR s.granted_at < clock_timestamp() - make_interval(secs => p_wake_s));
  END LOOP;
END $$;

REVOKE EXECUTE ON FUNCTION turn_slot_limit(text, integer), turn_slots_promote(text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION take_turn_slot(text, text, integer), release_turn_slot(text, text, integer),
  sweep_turn_slots(integer, double precision, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION take_turn_slot(text, text, integer), release_turn_slot(text, text, integer),
  sweep_turn_slots(integer, double precision, double precision) TO wakeline_service;
