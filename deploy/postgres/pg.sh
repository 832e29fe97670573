#!/usr/bin/env bash
# Local Postgres for Wakeline: one private cluster, no Docker, no system service.
#
#   pg.sh up       install the server if missing, initdb once, start, bootstrap roles+db
#                  (run again with another WAKELINE_POSTGRES_DATABASE: adds that database)
#   pg.sh down     stop (fast), idempotent
#   pg.sh status   key=value lines (state, pid, port, data, socket_dir, log); exit 3 if stopped
#
# Env (all optional):
#   WAKELINE_ROOT     repo root (default: two levels above this script)
#   WAKELINE_PG_PORT  TCP port on 127.0.0.1 (default 15432)
#   WAKELINE_PG_DATA  data directory (default $ROOT/.data/postgres)
#   WAKELINE_POSTGRES_DATABASE  the database `up` creates (default wakeline; `make test`
#                     sets wakeline_test); the roles are the cluster's, one set for all
#   WAKELINE_CREDENTIALS_FILE  the roles' passwords (default $ROOT/.data/credentials.env,
#                     generated once by deploy/credentials.sh; re-applied on every `up`)
#
# When run as root the cluster runs as the unprivileged `postgres` user. If that user
# cannot reach the data directory (a clone under /root, say), the real directory goes to
# /var/tmp/wakeline-pg-<hash>/data and $WAKELINE_PG_DATA becomes a symlink to it.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${WAKELINE_ROOT:-$(cd "$SCRIPT_DIR/../.." && pwd)}"
PORT="${WAKELINE_PG_PORT:-15432}"
DATABASE="${WAKELINE_POSTGRES_DATABASE:-wakeline}"
DATA="${WAKELINE_PG_DATA:-$ROOT/.data/postgres}"
PG_USER=postgres
START_TIMEOUT=30
CREDENTIALS="$SCRIPT_DIR/../credentials.sh"

die() { echo "pg.sh: $*" >&2; exit 1; }
say() { echo "pg.sh: $*"; }

case "$DATA" in /*) ;; *) DATA="$PWD/$DATA" ;; esac
[[ "$DATABASE" =~ ^[A-Za-z0-9_]{1,63}$ ]] || die "WAKELINE_POSTGRES_DATABASE must be 1-63 letters, digits or _: '$DATABASE'"
HASH="$(printf '%s' "$DATA" | sha256sum | cut -c1-10)"
FALLBACK_BASE="/var/tmp/wakeline-pg-$HASH"

# Run a command as the cluster's OS user: `postgres` when we are root, else ourselves.
as_pg() {
    if [[ $EUID -eq 0 ]]; then
        (cd / && runuser -u "$PG_USER" -- "$@")
    else
        "$@"
    fi
}

find_bindir() {
    local initdb
    initdb="$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n1 || true)"
    [[ -n "$initdb" ]] && dirname "$initdb"
}

install_server() {
    [[ -n "$(find_bindir)" ]] && return 0
    [[ $EUID -eq 0 ]] || die "no PostgreSQL server in /usr/lib/postgresql; install the 'postgresql' package (needs root)"
    say "installing PostgreSQL (apt-get install postgresql)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
    [[ -n "$(find_bindir)" ]] || die "apt-get installed postgresql but no /usr/lib/postgresql/*/bin/initdb appeared"
}

# Can the cluster's OS user search directory $1 (and so every ancestor)?
pg_can_reach() {
    if [[ $EUID -eq 0 ]]; then
        runuser -u "$PG_USER" -- test -x "$1" 2>/dev/null
    else
        test -x "$1"
    fi
}

# Sets REAL_DATA: the directory the server actually uses (DATA itself, or the target
# of the DATA symlink). Creates it, owned by the cluster user, when missing.
resolve_data_dir() {
    if [[ $EUID -eq 0 ]]; then
        id -u "$PG_USER" >/dev/null 2>&1 || die "OS user '$PG_USER' missing (it comes with the postgresql package)"
    fi
    if [[ -L "$DATA" ]]; then
        REAL_DATA="$(readlink -f "$DATA")"
    else
        REAL_DATA="$DATA"
        mkdir -p "$(dirname "$DATA")"
        if [[ $EUID -eq 0 ]] && ! pg_can_reach "$(dirname "$DATA")"; then
            # The postgres user cannot traverse to $DATA (a clone under /root, say):
            # keep the real directory where it can, and leave a symlink behind.
            [[ -d "$DATA" && -n "$(ls -A "$DATA")" ]] \
                && die "$DATA is not empty but user $PG_USER cannot reach it; move it or set WAKELINE_PG_DATA"
            [[ -d "$DATA" ]] && rmdir "$DATA"
            REAL_DATA="$FALLBACK_BASE/data"
            install -d -o root -g root -m 0755 "$FALLBACK_BASE"
            ln -sfn "$REAL_DATA" "$DATA"
            say "user $PG_USER cannot reach $(dirname "$DATA"); data dir is $REAL_DATA (symlinked from $DATA)"
        fi
    fi
    mkdir -p "$REAL_DATA"
    if [[ $EUID -eq 0 ]]; then
        chown "$PG_USER:" "$REAL_DATA"
        pg_can_reach "$REAL_DATA" || die "user $PG_USER cannot reach $REAL_DATA; set WAKELINE_PG_DATA elsewhere"
    fi
    chmod 0700 "$REAL_DATA"
}

# Resolve paths without creating anything (for status/down).
peek_data_dir() {
    if [[ -L "$DATA" ]]; then REAL_DATA="$(readlink -f "$DATA")"; else REAL_DATA="$DATA"; fi
}

# The unix socket lives in the data dir (owned by the cluster user) unless that path is
# too long for sun_path (108 bytes), then in a short directory under /var/tmp.
socket_dir() {
    local sock="$REAL_DATA/.s.PGSQL.$PORT"
    if (( ${#sock} <= 100 )); then echo "$REAL_DATA"; else echo "$FALLBACK_BASE/run"; fi
}

write_config() {
    local sockdir="$1"
    if [[ "$sockdir" != "$REAL_DATA" ]]; then
        install -d -m 0755 "$FALLBACK_BASE"
        install -d -o "$(stat -c %U "$REAL_DATA")" -m 0700 "$sockdir"
    fi
    as_pg tee "$REAL_DATA/wakeline.conf" >/dev/null <<EOF
# Written by deploy/postgres/pg.sh on every 'up'; edits are overwritten.
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$sockdir'
shared_buffers = 128MB
max_connections = 100
logging_collector = off
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
# Statements per step in \`make bench\` (bench/pg_statements.py); loaded at start only.
shared_preload_libraries = 'pg_stat_statements'
EOF
}

init_cluster() {
    local bindir="$1"
    [[ -f "$REAL_DATA/PG_VERSION" ]] && return 0
    say "initdb in $REAL_DATA"
    as_pg "$bindir/initdb" -D "$REAL_DATA" --encoding=UTF8 --locale=C.UTF-8 \
        --auth-local=peer --auth-host=scram-sha-256 >"$REAL_DATA.initdb.log" 2>&1 \
        || { tail -n 20 "$REAL_DATA.initdb.log" >&2; die "initdb failed (log: $REAL_DATA.initdb.log)"; }
    echo "include_if_exists = 'wakeline.conf'" | as_pg tee -a "$REAL_DATA/postgresql.conf" >/dev/null
    # Peer auth on the socket; root may connect as the postgres superuser (it can become
    # that OS user anyway), every other OS user only as the same-named role.
    as_pg tee "$REAL_DATA/pg_ident.conf" >/dev/null <<'EOF'
wakeline  root      postgres
wakeline  /^(.*)$   \1
EOF
    as_pg tee "$REAL_DATA/pg_hba.conf" >/dev/null <<'EOF'
local   all   all                  peer map=wakeline
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
EOF
}

server_pid() {
    local bindir="$1"
    [[ -f "$REAL_DATA/PG_VERSION" ]] || return 1
    as_pg "$bindir/pg_ctl" status -D "$REAL_DATA" >/dev/null 2>&1 || return 1
    head -n1 "$REAL_DATA/postmaster.pid"
}

start_server() {
    local bindir="$1" sockdir="$2" log="$REAL_DATA/server.log"
    if server_pid "$bindir" >/dev/null; then
        say "already running (pid $(server_pid "$bindir"))"
        return 0
    fi
    write_config "$sockdir"
    say "starting on 127.0.0.1:$PORT (socket $sockdir, log $log)"
    as_pg "$bindir/pg_ctl" start -D "$REAL_DATA" -l "$log" -s -w -t "$START_TIMEOUT" \
        || { tail -n 30 "$log" >&2 || true; die "server did not start (log: $log)"; }
    local deadline=$((SECONDS + START_TIMEOUT))
    until "$bindir/pg_isready" -q -h 127.0.0.1 -p "$PORT"; do
        (( SECONDS < deadline )) || { tail -n 30 "$log" >&2; die "not accepting connections after ${START_TIMEOUT}s (log: $log)"; }
        sleep 0.2
    done
}

psql_super() {
    local bindir="$1" sockdir="$2" db="$3"; shift 3
    as_pg "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$sockdir" -p "$PORT" -d "$db" "$@"
}

# Roles and database, idempotently; attributes and passwords are re-asserted every time.
# The passwords are the generated ones (deploy/credentials.sh), handed to psql on stdin as
# \set lines: never on a command line, and the old role-name passwords are replaced.
bootstrap() {
    local bindir="$1" sockdir="$2" role var
    bash "$CREDENTIALS" ensure
    # stdin, not -f: the postgres user may not be able to read a clone under a root-only home
    {
        for role in owner service maintenance; do
            var="WAKELINE_POSTGRES_PASSWORDS__WAKELINE_$(tr a-z A-Z <<<"$role")"
            echo "\\set ${role}_password '$(bash "$CREDENTIALS" get "$var")'"
        done
        echo "\\set database '$DATABASE'"
        cat "$ROOT/deploy/postgres/bootstrap.sql"
    } | psql_super "$bindir" "$sockdir" postgres
}

cmd_up() {
    install_server
    local bindir sockdir
    bindir="$(find_bindir)"
    resolve_data_dir
    sockdir="$(socket_dir)"
    init_cluster "$bindir"
    start_server "$bindir" "$sockdir"
    bootstrap "$bindir" "$sockdir"
    say "ready: postgresql://wakeline_service@127.0.0.1:$PORT/$DATABASE (data $REAL_DATA)"
}

cmd_down() {
    local bindir
    bindir="$(find_bindir)" || true
    peek_data_dir
    if [[ -z "$bindir" ]] || ! server_pid "$bindir" >/dev/null; then
        say "not running"
        return 0
    fi
    as_pg "$bindir/pg_ctl" stop -D "$REAL_DATA" -m fast -s -w -t 60 || die "pg_ctl stop failed"
    say "stopped"
}

cmd_status() {
    local bindir pid=""
    bindir="$(find_bindir)" || true
    peek_data_dir
    [[ -n "$bindir" ]] && pid="$(server_pid "$bindir" || true)"
    echo "state=$([[ -n "$pid" ]] && echo running || echo stopped)"
    echo "pid=$pid"
    echo "port=$PORT"
    echo "data=$DATA"
    echo "real_data=$REAL_DATA"
    echo "socket_dir=$(socket_dir)"
    echo "log=$REAL_DATA/server.log"
    echo "bindir=$bindir"
    [[ -n "$pid" ]] || exit 3
}

case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
