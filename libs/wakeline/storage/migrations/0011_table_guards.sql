-- 0011: the two guards 0001..0010 wrote out table by table, as functions.
--
-- Every table created after this migration uses them instead of repeating the recipe:
--   SELECT wakeline_append_only('t');    -- history: UPDATE, DELETE and TRUNCATE refused
--   SELECT wakeline_tenant_scoped('t');  -- tenant data: RLS forced, tenant_isolation policy
-- The tables before this keep the guards their own migration gave them (an applied
-- migration is never edited); the objects these functions create are the same ones.
-- They run as the caller (the owner, in a migration): installing a trigger or a policy
-- needs the table's owner, and nobody else may execute them.

-- 0001's recipe: refuse_change() in a row trigger for UPDATE/DELETE and a statement
-- trigger for TRUNCATE, named <table>_refuse_change / _refuse_truncate, both ENABLE ALWAYS
-- so that session_replication_role = replica does not bypass them. The refusal is
-- refuse_change()'s own: SQLSTATE insufficient_privilege (42501), "... is append-only".
-- A partitioned table's row trigger reaches its partitions; TRUNCATE's does not (see
-- ensure_events_partition): each partition needs this call too.
CREATE FUNCTION wakeline_append_only(target regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  rel text := (SELECT c.relname FROM pg_class c WHERE c.oid = target);
BEGIN
  EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %s '
                 'FOR EACH ROW EXECUTE FUNCTION public.refuse_change()', rel || '_refuse_change', target);
  EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %s '
                 'FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_change()', rel || '_refuse_truncate', target);
  EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', target, rel || '_refuse_change');
  EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', target, rel || '_refuse_truncate');
END $$;

-- 0001's recipe for tenant data: RLS enabled and FORCED (it binds the owner too), and one
-- permissive policy for every role and command, `tenant_isolation`, keyed on the
-- transaction's wakeline.tenant; with none set, current_setting(..., true) is NULL or ''
-- and no row matches. The table needs a `tenant` column.
CREATE FUNCTION wakeline_tenant_scoped(target regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', target);
  EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', target);
  EXECUTE format(
    'CREATE POLICY tenant_isolation ON %s '
    'USING (tenant = current_setting(''wakeline.tenant'', true)) '
    'WITH CHECK (tenant = current_setting(''wakeline.tenant'', true))', target);
END $$;

-- Default privileges (0001) already keep these from PUBLIC; said again where it matters.
REVOKE EXECUTE ON FUNCTION wakeline_append_only(regclass), wakeline_tenant_scoped(regclass) FROM PUBLIC;
