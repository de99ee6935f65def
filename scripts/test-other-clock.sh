#!/usr/bin/env bash
# Runs the whole test suite on a shifted clock and in a far time zone, to show that no test depends
# on the date, the time of day or the time zone. Node and every process it starts run under
# libfaketime (Debian's `faketime` package) with the same offset; PostgreSQL runs as a private
# cluster on port 5433 under the same offset, so the store's now() and the tests' Date.now() agree.
# Usage: scripts/test-other-clock.sh [OFFSET [TZ [test-file filters...]]]
#   (defaults: +400d Pacific/Kiritimati, every test file)
# Needs root (the private cluster runs as the postgres user) and PostgreSQL's server binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
offset=${1:-+400d}
zone=${2:-Pacific/Kiritimati}
shift $(($# < 2 ? $# : 2))
command -v faketime >/dev/null || { echo "faketime is not installed (apt-get install faketime)" >&2; exit 2; }
lib=$(dpkg -L libfaketime 2>/dev/null | grep 'libfaketime.so.1$' | head -n 1)
pgbin=/usr/lib/postgresql/$(ls /usr/lib/postgresql | sort -V | tail -n 1)/bin
dir=$(mktemp -d /tmp/idem-clock-XXXXXX)
chown postgres "$dir"
su postgres -c "$pgbin/initdb -D $dir/data -A trust -U postgres" >"$dir/initdb.log"
su postgres -c "FAKETIME='$offset' LD_PRELOAD=$lib $pgbin/pg_ctl -D $dir/data -w -l $dir/log \
  -o '-p 5433 -k $dir -c max_connections=300' start" >/dev/null
trap 'su postgres -c "$pgbin/pg_ctl -D $dir/data -m fast stop" >/dev/null; rm -rf "$dir"' EXIT
echo "PostgreSQL on 127.0.0.1:5433 says $(psql -h 127.0.0.1 -p 5433 -U postgres -Atc 'select now()')"
echo "node says $(TZ=$zone faketime -f "$offset" node -e 'console.log(new Date().toString())')"
TZ=$zone IDEM_PG_URL=postgres://postgres@127.0.0.1:5433/postgres IDEM_REQUIRE_SERVICES=1 \
  faketime -f "$offset" node scripts/run-tests.mjs "$@"
