-- 0020: the tenant's sessions, one row per session instead of one index entry per event
-- (issue 10, storage).
--
-- 0018's event_keys_tenant_session_seq (tenant, session_id, seq) INCLUDE (ts) held every
-- event a second time, 165 bytes of each archived event's ~1.36 KB at 1M events, so the
-- signer could find each session's head (and event_tenants() each tenant) by a skip scan.
-- Both need only what is per session: which (tenant, session_id) pairs have keys. That is
-- session_keys, filled by the same statement trigger that fills event_keys, so whoever
-- inserts events registers their sessions in the statement that stores them; a head is then
-- one backward probe of event_keys' primary key (session_id, seq). Append-only like
-- event_keys and never removed by retention, so it is the same set 0018's index walked.
-- (tenant, session_id) and not session_id alone is the key for that reason: 0018's walk
-- found a session under every tenant that had keys for it, and so does this.
CREATE TABLE session_keys (
  tenant     text NOT NULL CHECK (tenant <> ''),
  session_id text NOT NULL,
  PRIMARY KEY (tenant, session_id)
);

-- Filled from what is there before RLS binds the owner (as the table's owner, with no
-- policy forced yet); event_keys is read through 0019's tenant_list policy, which admits
-- every row while wakeline.tenant_list is on.
SELECT set_config('wakeline.tenant_list', 'on', true);
INSERT INTO session_keys (tenant, session_id)
SELECT DISTINCT k.tenant, k.session_id FROM event_keys k;
SELECT set_config('wakeline.tenant_list', '', true);
-- event_tenants() below no longer reads event_keys, so nothing needs that policy now.
DROP POLICY tenant_list ON event_keys;

SELECT wakeline_append_only('session_keys');
SELECT wakeline_tenant_scoped('session_keys');
GRANT SELECT ON session_keys TO wakeline_service;

-- 0013's trigger function, registering the statement's sessions as well. ON CONFLICT DO
-- NOTHING: a session's later statements find its row; the WITH CHECK of the new row is the
-- tenant the events passed (the definer is bound by FORCE ROW LEVEL SECURITY). In (tenant,
-- session_id) order, the archiver's lock order, so two statements that register the same
-- sessions wait for each other rather than deadlock.
CREATE OR REPLACE FUNCTION record_event_keys() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  INSERT INTO public.event_keys (session_id, seq, event_id, tenant, ts, hash)
  SELECT i.session_id, i.seq, i.event_id, i.tenant, i.ts, i.hash FROM inserted AS i;
  INSERT INTO public.session_keys (tenant, session_id)
  SELECT DISTINCT i.tenant, i.session_id FROM inserted AS i ORDER BY 1, 2
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;
REVOKE EXECUTE ON FUNCTION record_event_keys() FROM PUBLIC;

-- 0019's function over session_keys' primary key: one probe per tenant, as before.
CREATE POLICY tenant_list ON session_keys FOR SELECT TO wakeline_owner
  USING (current_setting('wakeline.tenant_list', true) = 'on');

CREATE OR REPLACE FUNCTION event_tenants() RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM set_config('wakeline.tenant_list', 'on', true);
  RETURN QUERY
    WITH RECURSIVE t AS (
      (SELECT s.tenant FROM public.session_keys s ORDER BY s.tenant LIMIT 1)
      UNION ALL
      SELECT (SELECT s.tenant FROM public.session_keys s WHERE s.tenant > t.tenant ORDER BY s.tenant LIMIT 1)
        FROM t WHERE t.tenant IS NOT NULL)
    SELECT t.tenant FROM t WHERE t.tenant IS NOT NULL;
  PERFORM set_config('wakeline.tenant_list', '', true);
END $$;
REVOKE EXECUTE ON FUNCTION event_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION event_tenants() TO wakeline_service;

DROP INDEX event_keys_tenant_session_seq;
