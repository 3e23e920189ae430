#!/usr/bin/env bash
# Install the Debian packages the real-Slurm test cluster needs (tools/slurm-testbed.sh).
# Idempotent and quiet: a no-op when every package is already installed.  Needs root and apt.
# Tested on Debian 12 (Slurm 22.05.8, MariaDB 10.11, munge 0.5.15).
set -euo pipefail

# chromium: the report tests open the HTML in a real headless browser (tests/report/).
# prometheus: the minder tests query a real Prometheus (and load it with promtool) on loopback.
PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server chromium prometheus)

if [ "$(id -u)" -ne 0 ]; then
    echo "install-test-deps: must run as root (apt-get)" >&2
    exit 1
fi
command -v apt-get >/dev/null || { echo "install-test-deps: apt-get not found (Debian only)" >&2; exit 1; }

missing=()
for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

# Without a policy-rc.d the maintainer scripts start a system MariaDB (:3306) and the Slurm
# daemons through sysvinit; the testbed runs its own copies instead.  Keep a site's own policy file.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    own_policy=1
fi
cleanup() { if [ "$own_policy" -eq 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
