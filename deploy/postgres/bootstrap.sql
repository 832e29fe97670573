-- Roles and database, idempotently; attributes and passwords are re-asserted every time.
-- Run as a superuser against the `postgres` database, with the three passwords as psql
-- variables (owner_password, service_password, maintenance_password): by pg.sh locally
-- (from the generated .data/credentials.env, so an old cluster's role-name passwords are
-- replaced on the next `make up`), and by compose-bootstrap.sh in docker-compose.
-- Callers run psql with ON_ERROR_STOP, so a refusal below stops it with an error.
-- The database is `wakeline` unless the psql variable `database` names another (pg.sh passes
-- WAKELINE_POSTGRES_DATABASE: `make test` makes `wakeline_test` beside the demo's); the roles
-- are the cluster's, shared by every database it holds.
\if :{?owner_password}
\else
  DO $$ BEGIN RAISE EXCEPTION 'bootstrap.sql: psql variables owner_password, service_password and maintenance_password are required'; END $$;
\endif
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['wakeline_owner', 'wakeline_service', 'wakeline_maintenance'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
      EXECUTE format('CREATE ROLE %I LOGIN', r);
    END IF;
    EXECUTE format('ALTER ROLE %I LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION', r);
  END LOOP;
END $$;
-- A password equal to its role's name is what every clone had before: refuse it.
SELECT :'owner_password' IN ('', 'wakeline_owner') OR :'service_password' IN ('', 'wakeline_service')
       OR :'maintenance_password' IN ('', 'wakeline_maintenance') AS weak \gset
\if :weak
  DO $$ BEGIN RAISE EXCEPTION 'bootstrap.sql: a password is empty or equals its role name'; END $$;
\endif
ALTER ROLE wakeline_owner PASSWORD :'owner_password';
ALTER ROLE wakeline_service PASSWORD :'service_password';
ALTER ROLE wakeline_maintenance PASSWORD :'maintenance_password';
\if :{?database}
\else
  \set database wakeline
\endif
SELECT format('CREATE DATABASE %I OWNER wakeline_owner ENCODING ''UTF8'' TEMPLATE template0', :'database')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'database') \gexec
ALTER DATABASE :"database" OWNER TO wakeline_owner;
REVOKE ALL ON DATABASE :"database" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"database" TO wakeline_service, wakeline_maintenance;
\connect :"database"
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
