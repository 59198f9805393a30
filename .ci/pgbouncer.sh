# PgBouncer in transaction pooling mode in front of the CI PostgreSQL (127.0.0.1:5432).
#
# Meant to be *sourced* by .ci/run after PostgreSQL is up:
#
#     source .ci/pgbouncer.sh
#
# It installs Debian's pgbouncer if it is not on PATH, starts one as a daemon (as the
# unprivileged `postgres` user when run as root: pgbouncer refuses to run as root) with
# its own config in a temp dir, waits until it answers and exports
#
#     CHONGMING_TEST_PGBOUNCER=postgresql://postgres@127.0.0.1:PORT/test
#
# PORT is CHONGMING_PGBOUNCER_PORT (default 6432), or the next free port when that one
# is taken by something else. Sourcing it again reuses a transaction-mode pgbouncer
# already answering on that port instead of starting a second one.
#
# The pool is deliberately small (default_pool_size = 5 server connections for
# postgres@test) and the client limit high: the kit's stress runs open several worker
# processes, each with its own client-side pool, so the pooler really multiplexes many
# clients' transactions over few server connections. No `ignore_startup_parameters`:
# a store that relies on a startup `options` parameter must fail here, as it would on a
# stock pgbouncer.
#
# Everything is inside functions with local variables; nothing here calls `exit`, and a
# failing step fails the sourcing shell (.ci/run runs under `set -e`).

_chongming_pgb_port_in_use() {
    # Something accepts TCP connections on 127.0.0.1:$1.
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

_chongming_pgb_is_ours() {
    # A pgbouncer on port $1 whose admin console says pool_mode = transaction.
    local mode
    mode="$(PGCONNECT_TIMEOUT=3 psql -X -q -At -h 127.0.0.1 -p "$1" -U postgres -d pgbouncer \
        -c 'SHOW CONFIG' 2>/dev/null | awk -F'|' '$1 == "pool_mode" { print $2 }')" || return 1
    [ "$mode" = "transaction" ]
}

_chongming_pgb_answers() {
    # The pooled database answers a query through the pooler on port $1.
    [ "$(PGCONNECT_TIMEOUT=3 psql -X -q -At -h 127.0.0.1 -p "$1" -U postgres -d test \
        -c 'SELECT 1' 2>/dev/null)" = "1" ]
}

_chongming_pgb_start() {
    local port="$1" dir run_as=()
    dir="$(mktemp -d "${TMPDIR:-/tmp}/chongming-pgbouncer.XXXXXX")"
    cat >"$dir/pgbouncer.ini" <<EOF
[databases]
test = host=127.0.0.1 port=5432 dbname=test

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 5
reserve_pool_size = 0
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
    # trust still looks the user up in the auth_file; the password is never checked.
    printf '"postgres" ""\n' >"$dir/userlist.txt"
    if [ "$(id -u)" = 0 ]; then
        chown -R postgres: "$dir"
        run_as=(-u postgres)
    fi
    pgbouncer -q -d "${run_as[@]}" "$dir/pgbouncer.ini"
    local _
    for _ in $(seq 1 50); do
        _chongming_pgb_answers "$port" && break
        sleep 0.2
    done
    if ! _chongming_pgb_answers "$port"; then
        echo "pgbouncer did not answer on 127.0.0.1:$port; its log:" >&2
        cat "$dir/pgbouncer.log" >&2 || true
        return 1
    fi
    echo "pgbouncer: started on 127.0.0.1:$port (transaction pooling), config in $dir"
}

_chongming_pgbouncer() {
    if ! command -v pgbouncer >/dev/null 2>&1; then
        echo "pgbouncer: installing Debian's package"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null \
            || { apt-get update -qq \
                 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }
    fi
    local port="${CHONGMING_PGBOUNCER_PORT:-6432}" last
    last=$((port + 100))
    while [ "$port" -lt "$last" ]; do
        if ! _chongming_pgb_port_in_use "$port"; then
            _chongming_pgb_start "$port" || return 1
            break
        fi
        if _chongming_pgb_is_ours "$port" && _chongming_pgb_answers "$port"; then
            echo "pgbouncer: reusing the transaction-mode pgbouncer on 127.0.0.1:$port"
            break
        fi
        port=$((port + 1))  # taken by something else (e.g. the package's own pgbouncer)
    done
    if [ "$port" -ge "$last" ]; then
        echo "pgbouncer: no free port in ${CHONGMING_PGBOUNCER_PORT:-6432}..$((last - 1))" >&2
        return 1
    fi
    export CHONGMING_TEST_PGBOUNCER="postgresql://postgres@127.0.0.1:$port/test"
}

_chongming_pgbouncer
