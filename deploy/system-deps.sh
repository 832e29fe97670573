#!/usr/bin/env bash
# Installs the Debian packages the local stack needs, only those missing: the project must
# set up a fresh machine by itself (CI runs on a clean clone).
set -euo pipefail

need=()
# A JDK, not only a runtime: kafka.sh runs deploy/kafka/ScramUsers.java from source when a
# data dir's SCRAM users must be added or changed (an old PLAINTEXT dir, a changed password).
java --list-modules 2>/dev/null | grep -q '^jdk.compiler' || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need+=(maven)
command -v kcat >/dev/null || need+=(kcat)
command -v bwrap >/dev/null || need+=(bubblewrap)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# headless Chromium for the browser tests (a transcript page must run nothing)
command -v chromium >/dev/null || need+=(chromium)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${need[*]}; install them (as root: apt-get install ${need[*]})" >&2
  exit 1
fi
echo "system-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
