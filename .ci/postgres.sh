#!/usr/bin/env bash
# Make sure Debian's PostgreSQL server binaries are present: the store tests start a
# throwaway server from them on 127.0.0.1 (tests/support/postgres.py).
set -euo pipefail
if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "PostgreSQL is missing: install Debian's 'postgresql' package (needs root)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
# The package starts a cluster of its own; the tests do not use it.
pg_ctlcluster --force "$(ls /etc/postgresql | sort | tail -1)" main stop 2>/dev/null || true
