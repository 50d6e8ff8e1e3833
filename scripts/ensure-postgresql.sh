#!/usr/bin/env bash
# The profile-store tests start their own PostgreSQL server (tests/pgserver.py) from Debian's
# package; it needs no service of its own, so the package's default cluster is not created.
set -euo pipefail
if command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "PostgreSQL is missing: run 'sudo apt-get install -y postgresql' (PostgreSQL tests will be skipped)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
mkdir -p /etc/postgresql-common
grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf \
  || echo 'create_main_cluster = false' >> /etc/postgresql-common/createcluster.conf
apt-get update -qq
apt-get install -y -qq postgresql >/dev/null
