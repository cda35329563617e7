#!/usr/bin/env bash
# Start a throwaway PostgreSQL server (Debian's packages) on loopback for the annotation server's tests.
# Prints `export STEPWISE_TEST_POSTGRES_URL=...` and `export STEPWISE_TEST_POSTGRES_DIR=...`; stop it with
#   scripts/ci/postgres.sh stop "$STEPWISE_TEST_POSTGRES_DIR"
set -euo pipefail
if [[ ${1:-} == stop ]]; then
    dir=$2
    if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$(cat "$dir/bin")/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
    else "$(cat "$dir/bin")/pg_ctl" -D "$dir/data" -m fast stop >/dev/null; fi
    rm -rf "$dir"
    exit 0
fi
port=${STEPWISE_PG_PORT:-55432}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [[ -z $bin || ! -x $bin/initdb ]]; then
    echo "postgres.sh: installing PostgreSQL from Debian's packages" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi
dir=$(mktemp -d /tmp/stepwise-pg.XXXXXX)
echo "$bin" > "$dir/bin"
as_pg=()
if [[ $(id -u) == 0 ]]; then
    # PostgreSQL refuses to run as root: the cluster belongs to the packages' postgres user.
    chown postgres "$dir"
    as_pg=(runuser -u postgres --)
fi
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -A trust -U stepwise >/dev/null
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=on" start >/dev/null
"$bin/createdb" -h 127.0.0.1 -p "$port" -U stepwise stepwise_test
echo "export STEPWISE_TEST_POSTGRES_URL=postgres://stepwise@127.0.0.1:$port/stepwise_test"
echo "export STEPWISE_TEST_POSTGRES_DIR=$dir"
