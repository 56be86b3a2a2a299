#!/usr/bin/env bash
# Debian packages the suite uses: PostgreSQL's server binaries (the store tests start a
# throwaway server from them on 127.0.0.1, tests/support/postgres.py) and wrk (the API
# load benchmark's GET phase) and chromium (the dashboard's browser tests drive it with
# Playwright, tests/browser). Installs only what is missing.
set -euo pipefail
missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v wrk >/dev/null || missing+=(wrk)
command -v chromium >/dev/null || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${missing[*]} (install them as root)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The postgresql package starts a cluster of its own; the tests do not use it.
if [[ " ${missing[*]} " == *" postgresql "* ]]; then
  pg_ctlcluster --force "$(ls /etc/postgresql | sort | tail -1)" main stop 2>/dev/null || true
fi
