-- Roles and database, idempotently; attributes and passwords are re-asserted every time.
-- Run as a superuser against the `postgres` database: by pg.sh locally, and by the
-- official image's initdb hook in docker-compose. Passwords are the local defaults;
-- a real deployment changes them (ALTER ROLE ... PASSWORD) and sets the DSNs to match.
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['wakeline_owner', 'wakeline_service', 'wakeline_maintenance'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
      EXECUTE format('CREATE ROLE %I LOGIN', r);
    END IF;
    EXECUTE format('ALTER ROLE %I LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD %L', r, r);
  END LOOP;
END $$;
SELECT 'CREATE DATABASE wakeline OWNER wakeline_owner ENCODING ''UTF8'' TEMPLATE template0'
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'wakeline') \gexec
ALTER DATABASE wakeline OWNER TO wakeline_owner;
REVOKE ALL ON DATABASE wakeline FROM PUBLIC;
GRANT CONNECT ON DATABASE wakeline TO wakeline_service, wakeline_maintenance;
\connect wakeline
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
