#!/bin/sh
# Install the aegis-slurm analytics schedule: `sudo deploy/install.sh` (DESTDIR=... to stage).
# Installs the runner, the systemd units, an env file (kept if present) and enables the timers.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root="${DESTDIR:-}"
install -d -m 0755 "$root/usr/local/libexec" "$root/etc/systemd/system" "$root/etc/aegis-slurm"
install -m 0755 "$here/aegis-slurm-run" "$root/usr/local/libexec/aegis-slurm-run"
for f in "$here"/systemd/*.service "$here"/systemd/*.timer; do
    install -m 0644 "$f" "$root/etc/systemd/system/$(basename "$f")"
done
if [ ! -e "$root/etc/aegis-slurm/analytics.env" ]; then
    install -m 0644 "$here/aegis-slurm.env" "$root/etc/aegis-slurm/analytics.env"
fi
if [ -z "$root" ]; then
    # The units and the cron example run as the unprivileged system user "aegis".
    if ! getent passwd aegis >/dev/null 2>&1; then
        useradd --system --user-group --home-dir /var/lib/aegis-slurm \
            --shell /usr/sbin/nologin aegis
    fi
    install -d -o aegis -g aegis -m 0755 /var/lib/aegis-slurm
    # With PrivateData=jobs sacct shows a plain user only its own jobs: the nightly ingest
    # would silently miss every other job.
    if command -v scontrol >/dev/null 2>&1 &&
        scontrol show config 2>/dev/null | grep -i '^PrivateData' | grep -qi jobs; then
        echo "warning: PrivateData=jobs is set: give aegis Operator level or ingest sees only" \
            "its own jobs:  sacctmgr -i add user aegis account=root adminlevel=Operator" >&2
    fi
fi
if [ -z "$root" ] && [ -d /run/systemd/system ]; then  # systemd is PID 1 (sd_booted)
    systemctl daemon-reload
    systemctl enable --now aegis-slurm-ingest.timer aegis-slurm-report.timer aegis-slurm-check.timer
elif [ -z "$root" ]; then
    echo "systemd is not running here: timers not enabled; see deploy/cron.example" >&2
fi
echo "installed; edit /etc/aegis-slurm/analytics.env (store, reports, thresholds)"
