-- 0031: member leases (issue 37). A brain holds one Postgres session for as long as it lives,
-- and its row here names that session (backend pid and start). A process that dies - kill -9,
-- the OOM killer, a crash - has its sockets closed by the kernel, and Postgres ends the session
-- at once; the Kafka group coordinator learns of the death only at the member's session timeout,
-- and keeps a dead static member in every rebalance until then, its partitions assigned to
-- nobody alive. So a live member that finds a lease whose session is gone removes that member
-- from the Kafka group by its group.instance.id (LeaveGroup v3, KIP-345): its partitions move in
-- about a second instead of the session timeout.
--
-- Coordination, not history (like turn_slots): rows come and go. Correctness never rests on
-- it: a member removed while alive (its Postgres connection broke) rejoins at its next
-- heartbeat, and one writer per partition is the transactional fence's work, not this table's.
-- A machine that vanishes without closing its sockets is found by the session timeout, as before.

CREATE TABLE group_leases (
  group_id      text        NOT NULL CHECK (group_id <> ''),
  instance_id   text        NOT NULL CHECK (instance_id <> ''),
  backend_pid   integer     NOT NULL,
  backend_start timestamptz NOT NULL,
  -- When a check first found the session gone; NULL while it lives.
  lapsed_at     timestamptz,
  PRIMARY KEY (group_id, instance_id)
);

-- The functions run as their caller, not SECURITY DEFINER: pg_stat_activity shows a session's
-- start only to its own role (or pg_read_all_stats), and the brains' sessions are the service
-- role's, as are the callers. Run as the owner they would find every lease's start hidden.
REVOKE ALL ON group_leases FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON group_leases TO wakeline_service;

-- Called on the lease's own connection: this session now stands for the member (a restart
-- under the same name takes the row over).
CREATE FUNCTION take_group_lease(p_group text, p_instance text) RETURNS void
LANGUAGE sql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
  INSERT INTO public.group_leases (group_id, instance_id, backend_pid, backend_start)
  SELECT p_group, p_instance, a.pid, a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()
  ON CONFLICT (group_id, instance_id) DO UPDATE
    SET backend_pid = excluded.backend_pid, backend_start = excluded.backend_start, lapsed_at = NULL;
$$;

-- The group's members whose session has been gone for p_after_s or longer: deleted here and
-- returned, for the caller to remove from the Kafka group (each to one caller only: the
-- delete locks the row). A lease found gone is first only marked: a member restarted under
-- its own name takes the lease back within that time and keeps its partitions (static
-- membership), and after a Postgres restart, which ends every session at once, each member
-- takes its lease again as it reconnects. The pid and start together name a session: pids
-- are reused.
CREATE FUNCTION lapsed_group_leases(p_group text, p_after_s double precision) RETURNS SETOF text
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE public.group_leases l SET lapsed_at = clock_timestamp()
   WHERE l.group_id = p_group AND l.lapsed_at IS NULL
     AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                      WHERE a.pid = l.backend_pid AND a.backend_start = l.backend_start);
  RETURN QUERY
    DELETE FROM public.group_leases l
     WHERE l.group_id = p_group AND l.lapsed_at <= clock_timestamp() - make_interval(secs => p_after_s)
    RETURNING l.instance_id;
END $$;

REVOKE EXECUTE ON FUNCTION take_group_lease(text, text), lapsed_group_leases(text, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION take_group_lease(text, text), lapsed_group_leases(text, double precision) TO wakeline_service;
