-- 0033: a tenant's share of the sessions at work stays reserved for a while after it last gave a
-- slot back (issue 34). Under 0032 a tenant that works in bursts (a batch of sessions, a pause,
-- the next batch) lost its share the moment its last session ended: a tenant beside it grew back
-- to its whole quota in the pause, then gave the room back at the next burst, a turn at a time,
-- each turn given back a `turn_queued` and a wake. Measured side by side (docs/benchmarks.md,
-- "Fair share: the share's churn"), that cost the bursty tenant more than holding the other at its
-- share all through. Now a tenant that released a slot within `turn_slot_linger()` (10 s) and
-- holds and waits for none still counts among the tenants sharing the total, holding the most it
-- held at a release in that time, up to an equal share. Past it, the tenant is gone; a tenant with
-- no other within it is held to its quota only, as before.
--
-- Nothing is written or reserved without a total (`p_total` NULL: the 3-argument forms, brains
-- without WAKELINE_RUNNING_SESSIONS_TOTAL). Only release_turn_slot writes `turn_slot_seen`, once
-- per slot given back, under the tenant's own lock.

CREATE TABLE turn_slot_seen (
  tenant text PRIMARY KEY,
  released_at timestamptz NOT NULL,
  peak integer NOT NULL CHECK (peak >= 1)  -- the most it held at a release within the linger
);
REVOKE ALL ON turn_slot_seen FROM PUBLIC;

CREATE FUNCTION turn_slot_linger() RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT interval '10 seconds' $$;

CREATE OR REPLACE FUNCTION turn_slot_share(p_tenant text, p_limit integer, p_total integer) RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  tenants integer;
  others integer;
  peaks integer[];
  fair integer;
  share integer;
BEGIN
  IF p_total IS NULL THEN
    RETURN p_limit;
  END IF;
  WITH active AS (
    SELECT w.tenant, sum(w.n)::integer AS held FROM (
      SELECT s.tenant, 1 AS n FROM public.turn_slots s UNION ALL SELECT q.tenant, 0 FROM public.turn_queue q) w
    GROUP BY w.tenant
  ), lingering AS (
    SELECT g.tenant, g.peak FROM public.turn_slot_seen g
     WHERE g.released_at > now() - public.turn_slot_linger() AND g.tenant NOT IN (SELECT a.tenant FROM active a)
  )
  SELECT (SELECT count(*) FROM (SELECT a.tenant FROM active a UNION SELECT l.tenant FROM lingering l
                                UNION SELECT p_tenant) x)::integer,
         coalesce((SELECT sum(a.held) FROM active a WHERE a.tenant <> p_tenant), 0)::integer,
         coalesce((SELECT array_agg(l.peak) FROM lingering l WHERE l.tenant <> p_tenant), '{}')
    INTO tenants, others, peaks;
  IF tenants < 2 THEN
    RETURN p_limit;
  END IF;
  fair := ceil(p_total::numeric / tenants)::integer;
  others := others + coalesce((SELECT sum(least(p, fair)) FROM unnest(peaks) p), 0)::integer;
  share := greatest(fair, p_total - others, 1);
  RETURN CASE WHEN p_limit IS NULL THEN share ELSE least(p_limit, share) END;
END $$;

CREATE OR REPLACE FUNCTION release_turn_slot(p_tenant text, p_session text, p_default integer, p_total integer)
RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  held integer;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('wakeline.turn_slots:' || p_tenant, 0));
  IF p_total IS NOT NULL
     AND EXISTS (SELECT 1 FROM public.turn_slots s WHERE s.session_id = p_session AND s.tenant = p_tenant) THEN
    SELECT count(*) INTO held FROM public.turn_slots s WHERE s.tenant = p_tenant;
    INSERT INTO public.turn_slot_seen AS g (tenant, released_at, peak) VALUES (p_tenant, now(), held)
      ON CONFLICT (tenant) DO UPDATE
      SET released_at = now(),
          peak = CASE WHEN g.released_at > now() - public.turn_slot_linger() THEN greatest(g.peak, held) ELSE held END;
  END IF;
  DELETE FROM public.turn_slots s WHERE s.session_id = p_session AND s.tenant = p_tenant;
  DELETE FROM public.turn_queue q WHERE q.session_id = p_session AND q.tenant = p_tenant;
  RETURN public.turn_slots_promote(p_tenant,
                                   public.turn_slot_share(p_tenant, public.turn_slot_limit(p_tenant, p_default), p_total));
END $$;

REVOKE EXECUTE ON FUNCTION turn_slot_linger() FROM PUBLIC;
