-- 0006: who may read what. API keys (hashed, append-only, revoked by a second row),
-- a per-caller owner restriction on reads, the append-only access log of audit reads,
-- and the index behind audit queries by actor and time.

-- A key is `wkl_<key_id>_<secret>`; only sha256(secret) is stored. Keys are written by
-- `wakeline keys create` as the owner and never changed: revoking adds a row below.
CREATE TABLE api_keys (
  key_id      text        PRIMARY KEY CHECK (key_id ~ '^[0-9a-f]{16}$'),
  tenant      text        NOT NULL CHECK (tenant <> ''),
  principal   text        NOT NULL CHECK (principal ~ '^[A-Za-z0-9._@-]{1,100}$'),
  role        text        NOT NULL CHECK (role IN ('user', 'auditor', 'admin', 'service')),
  secret_hash text        NOT NULL CHECK (secret_hash ~ '^[0-9a-f]{64}$'),
  created_at  timestamptz NOT NULL DEFAULT now(),
  created_by  text        NOT NULL DEFAULT session_user,
  note        text
);
CREATE INDEX api_keys_tenant ON api_keys (tenant, principal);

CREATE TABLE api_key_revocations (
  key_id     text        PRIMARY KEY REFERENCES api_keys (key_id),
  revoked_at timestamptz NOT NULL DEFAULT now(),
  revoked_by text        NOT NULL DEFAULT session_user
);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['api_keys', 'api_key_revocations'] LOOP
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I '
                   'FOR EACH ROW EXECUTE FUNCTION refuse_change()', t || '_refuse_change', t);
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION refuse_change()', t || '_refuse_truncate', t);
    EXECUTE format('ALTER TABLE %I ENABLE ALWAYS TRIGGER %I', t, t || '_refuse_change');
    EXECUTE format('ALTER TABLE %I ENABLE ALWAYS TRIGGER %I', t, t || '_refuse_truncate');
  END LOOP;
END $$;

-- The gateway cannot read the key tables; it asks for one key by id and compares the
-- hash itself (in constant time). The tenant comes out of here, never from a request.
CREATE FUNCTION api_key_lookup(lookup_id text)
RETURNS TABLE (tenant text, principal text, role text, secret_hash text, revoked boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT k.tenant, k.principal, k.role, k.secret_hash, r.key_id IS NOT NULL
    FROM public.api_keys k LEFT JOIN public.api_key_revocations r ON r.key_id = k.key_id
   WHERE k.key_id = lookup_id
$$;
REVOKE EXECUTE ON FUNCTION api_key_lookup(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION api_key_lookup(text) TO wakeline_service;

-- Reads on behalf of a `user` set wakeline.viewer (transaction-local, like the tenant)
-- to the owner they may see; these RESTRICTIVE policies AND with tenant isolation, so
-- a gateway bug that forgets the owner check in Python still returns no foreign rows.
-- Unset (services, auditors, admins): no extra restriction.
CREATE POLICY viewer_owns ON sessions AS RESTRICTIVE FOR SELECT
  USING (coalesce(current_setting('wakeline.viewer', true), '') = ''
         OR owner = current_setting('wakeline.viewer', true));
CREATE POLICY viewer_owns ON events AS RESTRICTIVE FOR SELECT
  USING (coalesce(current_setting('wakeline.viewer', true), '') = ''
         OR EXISTS (SELECT 1 FROM sessions s
                     WHERE s.session_id = events.session_id
                       AND s.owner = current_setting('wakeline.viewer', true)));

-- Who read the audit trail, what they asked and when. Written by the gateway before it
-- answers, so an export cut short is still recorded; readable by a tenant's admin.
CREATE TABLE audit_access_log (
  id        bigserial   PRIMARY KEY,
  tenant    text        NOT NULL CHECK (tenant <> ''),
  principal text        NOT NULL,
  role      text        NOT NULL,
  key_id    text        NOT NULL,
  at        timestamptz NOT NULL DEFAULT clock_timestamp(),
  method    text        NOT NULL,
  path      text        NOT NULL,
  query     jsonb       NOT NULL
);
CREATE INDEX audit_access_log_tenant_at ON audit_access_log (tenant, at, id);
CREATE TRIGGER audit_access_log_refuse_change BEFORE UPDATE OR DELETE ON audit_access_log
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER audit_access_log_refuse_truncate BEFORE TRUNCATE ON audit_access_log
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
ALTER TABLE audit_access_log ENABLE ALWAYS TRIGGER audit_access_log_refuse_change;
ALTER TABLE audit_access_log ENABLE ALWAYS TRIGGER audit_access_log_refuse_truncate;
ALTER TABLE audit_access_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_access_log FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON audit_access_log
  USING (tenant = current_setting('wakeline.tenant', true))
  WITH CHECK (tenant = current_setting('wakeline.tenant', true));
GRANT SELECT, INSERT ON audit_access_log TO wakeline_service;
GRANT USAGE ON SEQUENCE audit_access_log_id_seq TO wakeline_service;

-- Audit pages are keyset-paged in (ts, session_id, seq) order; with tenant and actor
-- fixed this index yields that order directly, per partition, so a first page reads
-- `limit` index entries instead of sorting every match. It supersedes (tenant, actor, ts).
CREATE INDEX events_audit_actor ON events (tenant, actor, ts, session_id, seq);
DROP INDEX events_tenant_actor_ts;
