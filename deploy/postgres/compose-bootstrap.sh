#!/bin/sh
# docker-compose's Postgres init hook (/docker-entrypoint-initdb.d): bootstrap.sql with the
# roles' passwords from the container's environment, handed to psql on stdin as \set lines.
set -eu
{
  printf "\\set owner_password '%s'\n" "$WAKELINE_POSTGRES_PASSWORDS__WAKELINE_OWNER"
  printf "\\set service_password '%s'\n" "$WAKELINE_POSTGRES_PASSWORDS__WAKELINE_SERVICE"
  printf "\\set maintenance_password '%s'\n" "$WAKELINE_POSTGRES_PASSWORDS__WAKELINE_MAINTENANCE"
  cat /wakeline/bootstrap.sql
} | psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres
