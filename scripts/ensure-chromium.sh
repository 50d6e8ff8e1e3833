#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through Playwright (no browser download).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "chromium is missing: run 'sudo apt-get install -y chromium' (browser tests will be skipped)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
