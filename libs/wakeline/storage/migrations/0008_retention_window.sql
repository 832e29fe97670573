-- 0008: a tenant's admin sets its own retention window through the gateway, and every
-- change is kept. The service role may upsert retention_policies for the tenant set on
-- its transaction (RLS tenant_isolation, 0004); a trigger appends each new value, with
-- who set it, to retention_policy_changes, which nobody can change or delete.

CREATE TABLE retention_policy_changes (
  id     bigserial   PRIMARY KEY,
  tenant text        NOT NULL CHECK (tenant <> ''),
  keep   interval    NOT NULL,
  set_by text,
  set_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX retention_policy_changes_tenant ON retention_policy_changes (tenant, id);
CREATE TRIGGER retention_policy_changes_refuse_change BEFORE UPDATE OR DELETE ON retention_policy_changes
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER retention_policy_changes_refuse_truncate BEFORE TRUNCATE ON retention_policy_changes
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
ALTER TABLE retention_policy_changes ENABLE ALWAYS TRIGGER retention_policy_changes_refuse_change;
ALTER TABLE retention_policy_changes ENABLE ALWAYS TRIGGER retention_policy_changes_refuse_truncate;
ALTER TABLE retention_policy_changes ENABLE ROW LEVEL SECURITY;
ALTER TABLE retention_policy_changes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON retention_policy_changes
  USING (tenant = current_setting('wakeline.tenant', true))
  WITH CHECK (tenant = current_setting('wakeline.tenant', true));

-- SECURITY DEFINER so the writer needs no INSERT on the history; the row's tenant is the
-- policy's, which already passed RLS's WITH CHECK.
CREATE FUNCTION record_retention_policy() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  INSERT INTO public.retention_policy_changes (tenant, keep, set_by) VALUES (NEW.tenant, NEW.keep, NEW.set_by);
  RETURN NULL;
END $$;
REVOKE EXECUTE ON FUNCTION record_retention_policy() FROM PUBLIC;
CREATE TRIGGER retention_policies_history AFTER INSERT OR UPDATE ON retention_policies
  FOR EACH ROW EXECUTE FUNCTION record_retention_policy();
ALTER TABLE retention_policies ENABLE ALWAYS TRIGGER retention_policies_history;
-- A policy is replaced, never removed: "no window" would mean "keep forever" silently.
CREATE TRIGGER retention_policies_refuse_delete BEFORE DELETE OR TRUNCATE ON retention_policies
  FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
ALTER TABLE retention_policies ENABLE ALWAYS TRIGGER retention_policies_refuse_delete;

GRANT INSERT, UPDATE ON retention_policies TO wakeline_service;
GRANT SELECT ON retention_policy_changes TO wakeline_service;
