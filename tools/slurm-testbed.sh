#!/usr/bin/env bash
# A real Slurm cluster on one machine, for integration tests: Debian 12's Slurm 22.05 with
# slurmctld, N x `slurmd -N nodeX` (fake GPUs), slurmdbd + MariaDB and munge, all started by hand
# (no systemd, no docker).  Everything lives under $SLURM_TESTBED_DIR.  Needs root.
#
#   slurm-testbed.sh install   apt packages (tools/install-test-deps.sh) and the test users
#   slurm-testbed.sh start     install when missing, write config, start what is not running; idempotent
#   slurm-testbed.sh stop      stop every daemon and leftover slurmstepd of this cluster
#   slurm-testbed.sh restart   stop + start (rewrites the config from the knobs)
#   slurm-testbed.sh reset     clear hook flags, cancel all jobs, restart dead slurmds, resume nodes
#   slurm-testbed.sh status    daemons and nodes; exit 0 all up, 1 partly up, 3 all down
#   slurm-testbed.sh env       print `export SLURM_CONF=...`
#   slurm-testbed.sh clean     stop, then delete the directory and the cluster's cgroup leftovers
#
# Knobs (environment): SLURM_TESTBED_DIR (/srv/slurm-testbed), _NODES (8), _GPUS (8 per node),
# _GPU_TYPE (h100; empty = untyped), _CPUS (8), _MEM (2048 MB), _USERS ("alice bob"), _CLUSTER,
# _PROLOG, _EPILOG, _PROLOG_CTLD, _EPILOG_CTLD (absolute paths; "none" leaves the hook out; default:
# the recording hooks), _PROLOGFLAGS (Alloc,Contain), _TASK (auto: task/cgroup on cgroup v1),
# _SLURMD_TIMEOUT (10), _CTLD_PORT (6817), _DBD_PORT (6819), _DB_PORT (13306), _NODE_PORT (17001,
# first slurmd port), _LINK_ETC (1: symlink /etc/slurm/slurm.conf when that path is free),
# _EXTRA_CONF (lines appended to slurm.conf).
#
# The recording hooks log each call with its SLURM*/CUDA*/GPU* environment to $D/log/hooks.log and
# obey flag files in $D/state/ (each may carry a -job<ID> suffix to apply to one job only):
#   fail-<hook>-<nodeX|ctld>          exit 1
#   setAdminComment-<hook>            scontrol update jobid=N AdminComment=scontrol:<hook>:<where>
#   sacctmgrAdminComment-<hook>       sacctmgr -i modify job where jobid=N set AdminComment=...
#   setComment-<hook>, sacctmgrComment-<hook>   the same for Comment
# where <hook> is prolog, epilog, prolog_slurmctld or epilog_slurmctld.
set -euo pipefail

D=${SLURM_TESTBED_DIR:-/srv/slurm-testbed}
NODES=${SLURM_TESTBED_NODES:-8}
GPUS=${SLURM_TESTBED_GPUS:-8}
GPU_TYPE=${SLURM_TESTBED_GPU_TYPE-h100}
CPUS=${SLURM_TESTBED_CPUS:-8}
MEM=${SLURM_TESTBED_MEM:-2048}
USERS=${SLURM_TESTBED_USERS:-alice bob}
CLUSTER=${SLURM_TESTBED_CLUSTER:-testbed}
PROLOG=${SLURM_TESTBED_PROLOG:-$D/hooks/prolog.sh}
EPILOG=${SLURM_TESTBED_EPILOG:-$D/hooks/epilog.sh}
PROLOG_CTLD=${SLURM_TESTBED_PROLOG_CTLD:-$D/hooks/prolog_slurmctld.sh}
EPILOG_CTLD=${SLURM_TESTBED_EPILOG_CTLD:-$D/hooks/epilog_slurmctld.sh}
PROLOGFLAGS=${SLURM_TESTBED_PROLOGFLAGS:-Alloc,Contain}
TASK=${SLURM_TESTBED_TASK:-auto}
SLURMD_TIMEOUT=${SLURM_TESTBED_SLURMD_TIMEOUT:-10}
CTLD_PORT=${SLURM_TESTBED_CTLD_PORT:-6817}
DBD_PORT=${SLURM_TESTBED_DBD_PORT:-6819}
DB_PORT=${SLURM_TESTBED_DB_PORT:-13306}
NODE_PORT=${SLURM_TESTBED_NODE_PORT:-17001}
LINK_ETC=${SLURM_TESTBED_LINK_ETC:-1}
EXTRA_CONF=${SLURM_TESTBED_EXTRA_CONF:-}

CONF=$D/etc/slurm.conf
ETC_LINK=/etc/slurm/slurm.conf
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SYS_PATH=/usr/sbin:/usr/bin:/sbin:/bin
export SLURM_CONF=$CONF
export PATH=$SYS_PATH:$PATH
NODE_NAMES=()
for ((i = 1; i <= NODES; i++)); do NODE_NAMES+=("node$i"); done

log() { printf '[slurm-testbed] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------- processes
# pid from a pid file when that process is alive and is the named program (guards pid reuse).
live_pid() {
    local file=$1 name=$2 pid argv0
    [ -r "$file" ] || return 1
    pid=$(tr -dc '0-9' <"$file")
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1)
    case "$(basename -- "$argv0")" in "$name"*) ;; *) return 1 ;; esac
    echo "$pid"
}

# Daemons get a clean environment (hooks see it) and none of our fds: not the op lock, not a
# caller's pipe (pytest would wait for EOF forever), not a caller's lock such as the session lock
# taken with flock(1) (munged, mariadbd and slurmdbd would hold it until they exit).
spawn() {
    (
        for fd in "/proc/$BASHPID/fd"/*; do
            fd=${fd##*/}
            if ((fd > 2)); then eval "exec $fd>&-"; fi  # fd is a number read from /proc
        done
        exec setsid env -i PATH=$SYS_PATH HOME=/root LANG=C.UTF-8 SLURM_CONF="$CONF" "$@" \
            </dev/null >>"$D/log/spawn.log" 2>&1
    ) &
}

wait_until() {  # wait_until SECONDS DESCRIPTION CMD...
    local limit=$1 what=$2 t0
    shift 2
    t0=$(date +%s)
    until "$@" >/dev/null 2>&1; do
        (($(date +%s) - t0 < limit)) || { log "timed out after ${limit}s waiting for $what"; return 1; }
        sleep 0.2
    done
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# TERM the given pids, wait up to 10 s, then KILL.
terminate() {
    local pid t
    (($#)) || return 0
    kill -TERM "$@" 2>/dev/null || true
    for ((t = 0; t < 50; t++)); do
        local alive=0
        for pid in "$@"; do [ -d "/proc/$pid" ] && alive=1; done
        ((alive)) || return 0
        sleep 0.2
    done
    kill -KILL "$@" 2>/dev/null || true
}

descendants() {  # every descendant pid of $1
    local -A parent_of=()
    local p stat rest fields pid
    for p in /proc/[0-9]*; do
        read -r stat 2>/dev/null <"$p/stat" || continue
        # The command name in (...) is chosen by the job and may hold spaces or ')'.
        rest=${stat##*) }
        read -ra fields <<<"$rest"
        parent_of[${p#/proc/}]=${fields[1]:-}
    done
    local todo=("$1")
    while ((${#todo[@]})); do
        local next=()
        for pid in "${!parent_of[@]}"; do
            for p in "${todo[@]}"; do
                if [ "${parent_of[$pid]}" = "$p" ]; then echo "$pid"; next+=("$pid"); fi
            done
        done
        todo=("${next[@]}")
    done
}

# slurmstepd and the job processes survive a SIGKILLed slurmd; find the ones of this cluster by the
# SLURM_CONF in their environment.
our_stepds() {
    local p comm
    for p in /proc/[0-9]*; do
        comm=$(cat "$p/comm" 2>/dev/null) || continue
        case "$comm" in slurmstepd*) ;; *) continue ;; esac
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$CONF" && echo "${p#/proc/}"
    done
}

pidf_munge=$D/munge/munged.pid
pidf_db=$D/mysql/mariadbd.pid
pidf_dbd=$D/run/slurmdbd.pid
pidf_ctld=$D/run/slurmctld.pid
pidf_slurmd() { echo "$D/run/slurmd-$1.pid"; }

# ---------------------------------------------------------------- install
do_install() {
    [ "$(id -u)" -eq 0 ] || die "must run as root"
    local t0
    t0=$(now)
    bash "$HERE/install-test-deps.sh"
    local u
    for u in $USERS; do
        id -u "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"
    done
    log "install done in $(elapsed "$t0") s"
}

installed() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
        command -v slurmdbd >/dev/null && command -v sacct >/dev/null &&
        command -v munged >/dev/null && command -v mariadbd >/dev/null
}

# ---------------------------------------------------------------- config
hostlist() {  # node[1-8] / node1
    if ((NODES == 1)); then echo node1; else echo "node[1-$NODES]"; fi
}

write_file() {  # write_file PATH MODE < content; replaced atomically so readers never see half
    local tmp
    tmp=$(mktemp "$1.XXXXXX")
    cat >"$tmp"
    chmod "$2" "$tmp"
    mv -f "$tmp" "$1"
}

write_config() {
    local task=$TASK gres_node="" tres="" last_port=$((NODE_PORT + NODES - 1)) ports
    if [ "$task" = auto ]; then
        # OUT_OF_MEMORY needs task/cgroup with cgroup v1's memory controller.
        if [ -d /sys/fs/cgroup/memory ]; then task=task/cgroup; else task=task/none; fi
    fi
    if ((GPUS > 0)); then
        if [ -n "$GPU_TYPE" ]; then
            gres_node="Gres=gpu:$GPU_TYPE:$GPUS"
            tres="AccountingStorageTRES=gres/gpu,gres/gpu:$GPU_TYPE"
        else
            gres_node="Gres=gpu:$GPUS"
            tres="AccountingStorageTRES=gres/gpu"
        fi
    fi
    if ((NODES == 1)); then ports=$NODE_PORT; else ports="[$NODE_PORT-$last_port]"; fi
    local hooks="" h
    [ "$PROLOG" = none ] || hooks+="Prolog=$PROLOG"$'\n'
    [ "$EPILOG" = none ] || hooks+="Epilog=$EPILOG"$'\n'
    [ "$PROLOG_CTLD" = none ] || hooks+="PrologSlurmctld=$PROLOG_CTLD"$'\n'
    [ "$EPILOG_CTLD" = none ] || hooks+="EpilogSlurmctld=$EPILOG_CTLD"$'\n'
    for h in "$PROLOG" "$EPILOG" "$PROLOG_CTLD" "$EPILOG_CTLD"; do
        case "$h" in none | /*) ;; *) die "hook paths must be absolute or 'none': $h" ;; esac
    done

    write_file "$CONF" 644 <<EOF
# Generated by slurm-testbed.sh; rewritten by 'restart'.
ClusterName=$CLUSTER
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
StateSaveLocation=$D/spool/ctld
SlurmdSpoolDir=$D/spool/d/%n
SlurmctldPidFile=$pidf_ctld
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=$task
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
GresTypes=gpu
# The nodes claim more CPUs than the host has.
SlurmdParameters=config_overrides
# 2 would undo an admin DOWN as soon as slurmd answers.
ReturnToService=1
SlurmctldTimeout=30
SlurmdTimeout=$SLURMD_TIMEOUT
MessageTimeout=10
InactiveLimit=0
MinJobAge=300
KillWait=5
OverTimeLimit=0
Waittime=0
SchedulerType=sched/backfill
# Het jobs are only started by backfill.
SchedulerParameters=bf_interval=5
MpiDefault=none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# sacct/sacctmgr find a non-default munge socket only through this.
AccountingStoragePass=$D/munge/munge.socket
$tres
AccountingStoreFlags=job_comment,job_env,job_script
JobCompType=jobcomp/none
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
RequeueExit=42
RequeueExitHold=43
${hooks}PrologFlags=$PROLOGFLAGS
NodeName=$(hostlist) NodeHostname=localhost NodeAddr=127.0.0.1 Port=$ports CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM $gres_node State=UNKNOWN
PartitionName=batch Nodes=$(hostlist) Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
PartitionName=scavenger Nodes=$(hostlist) Default=NO MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=CANCEL
PartitionName=urgent Nodes=$(hostlist) Default=NO MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
$EXTRA_CONF
EOF

    # A GPU needs a File= (count-only GPUs are dropped); character devices avoid an error per start.
    local gres="AutoDetect=off"$'\n'
    if ((GPUS > 0)); then
        local k
        for ((k = 0; k < GPUS; k++)); do
            [ -e "$D/dev/gpu$k" ] || mknod -m 666 "$D/dev/gpu$k" c 1 3 2>/dev/null || touch "$D/dev/gpu$k"
        done
        local files="$D/dev/gpu0"
        ((GPUS > 1)) && files="$D/dev/gpu[0-$((GPUS - 1))]"
        gres+="NodeName=$(hostlist) Name=gpu${GPU_TYPE:+ Type=$GPU_TYPE} File=$files"$'\n'
    fi
    write_file "$D/etc/gres.conf" 644 <<<"$gres"

    write_file "$D/etc/cgroup.conf" 644 <<EOF
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainRAMSpace=yes
ConstrainSwapSpace=no
ConstrainCores=no
ConstrainDevices=no
EOF

    # slurmdbd has no -f: it reads slurmdbd.conf beside $SLURM_CONF, and insists on mode 0600.
    write_file "$D/etc/slurmdbd.conf" 600 <<EOF
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$D/log/slurmdbd.log
PidFile=$pidf_dbd
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurmtestbed
StorageLoc=slurm_acct_db
EOF

    write_file "$D/etc/my.cnf" 644 <<EOF
[mysqld]
user=mysql
datadir=$D/mysql/data
socket=$D/mysql/mysqld.sock
pid-file=$pidf_db
log-error=$D/mysql/mariadb.log
bind-address=127.0.0.1
port=$DB_PORT
skip-name-resolve
innodb_buffer_pool_size=128M
innodb_log_file_size=32M
innodb_lock_wait_timeout=900
innodb_flush_log_at_trx_commit=2
[client]
socket=$D/mysql/mysqld.sock
port=$DB_PORT
EOF
}

write_hooks() {
    write_file "$D/hooks/record.sh" 755 <<EOF
#!/bin/bash
# Recording hook of slurm-testbed.sh: \$1 = prolog|epilog|prolog_slurmctld|epilog_slurmctld.
# Job-controlled values (names, comments) are only printed, never evaluated.
export PATH=$SYS_PATH
export SLURM_CONF=$CONF   # the *_slurmctld hooks get a scrubbed environment
D=$D
hook=\$1
where=\${SLURMD_NODENAME:-ctld}
job=\${SLURM_JOB_ID:-}
case "\$job" in '' | *[!0-9]*) job=none ;; esac
flag() { [ -e "\$D/state/\$1" ] || [ -e "\$D/state/\$1-job\$job" ]; }
exec 9>>"\$D/log/hooks.log"
record() { flock 9; printf '%s\n' "\$@" >&9; flock -u 9; }
record "=== \$hook \$where job=\$job time=\$(date -u +%Y-%m-%dT%H:%M:%SZ)" \\
    "\$(env | grep -E '^(SLURM|CUDA|GPU)' | sort)"
if [ "\$job" != none ]; then
    for field in AdminComment Comment; do
        if flag "set\$field-\$hook"; then
            out=\$(scontrol update "jobid=\$job" "\$field=scontrol:\$hook:\$where" 2>&1); rc=\$?
            record "--- \$hook \$where job=\$job scontrol \$field rc=\$rc \$out"
        fi
        if flag "sacctmgr\$field-\$hook"; then
            out=\$(sacctmgr -i modify job where "jobid=\$job" set "\$field=sacctmgr:\$hook:\$where" 2>&1); rc=\$?
            record "--- \$hook \$where job=\$job sacctmgr \$field rc=\$rc \$out"
        fi
    done
fi
if flag "fail-\$hook-\$where"; then
    record "--- \$hook \$where job=\$job failing on purpose (flag)"
    exit 1
fi
exit 0
EOF
    local h
    for h in prolog epilog prolog_slurmctld epilog_slurmctld; do
        write_file "$D/hooks/$h.sh" 755 <<EOF
#!/bin/sh
exec $D/hooks/record.sh $h
EOF
    done
}

make_dirs() {
    mkdir -p "$D"/{etc,munge,run,log,hooks,state,dev,spool/ctld,mysql}
    local n
    for n in "${NODE_NAMES[@]}"; do mkdir -p "$D/spool/d/$n"; done
    chmod 755 "$D" "$D/munge"  # munged: "Socket is inaccessible" unless 0755
    mkdir -p "$D/jobs"
    chmod 1777 "$D/jobs"        # users submit from here; slurm-%j.out lands here
    touch "$D/log/hooks.log"
}

link_etc() {
    [ "$LINK_ETC" = 1 ] || return 0
    if [ -L "$ETC_LINK" ] && [ "$(readlink "$ETC_LINK")" = "$CONF" ]; then return 0; fi
    if [ -e "$ETC_LINK" ] || [ -L "$ETC_LINK" ]; then
        log "$ETC_LINK exists and is not ours; clients need SLURM_CONF=$CONF"
        return 0
    fi
    mkdir -p /etc/slurm
    ln -s "$CONF" "$ETC_LINK"
}

unlink_etc() {
    if [ -L "$ETC_LINK" ] && [ "$(readlink "$ETC_LINK")" = "$CONF" ]; then rm -f "$ETC_LINK"; fi
}

# ---------------------------------------------------------------- start
any_daemon_running() {
    local n
    live_pid "$pidf_munge" munged >/dev/null && return 0
    live_pid "$pidf_db" mariadbd >/dev/null && return 0
    live_pid "$pidf_dbd" slurmdbd >/dev/null && return 0
    live_pid "$pidf_ctld" slurmctld >/dev/null && return 0
    for n in "${NODE_NAMES[@]}"; do live_pid "$(pidf_slurmd "$n")" slurmd >/dev/null && return 0; done
    return 1
}

db() { mariadb --defaults-file="$D/etc/my.cnf" -uroot "$@"; }

start_munge() {
    live_pid "$pidf_munge" munged >/dev/null && return 0
    if [ ! -s "$D/munge/munge.key" ]; then
        mungekey -c -k "$D/munge/munge.key" -b 1024 -f
    fi
    chown root:root "$D/munge/munge.key"
    chmod 600 "$D/munge/munge.key"
    rm -f "$D/munge/munge.socket" "$D/munge/munge.socket.lock"
    spawn munged --force -S "$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
        --log-file="$D/log/munged.log" --pid-file="$pidf_munge" --seed-file="$D/munge/munged.seed"
    wait_until 20 munged test -S "$D/munge/munge.socket" || die "munged did not start ($D/log/munged.log)"
}

start_db() {
    if ! live_pid "$pidf_db" mariadbd >/dev/null; then
        if [ ! -d "$D/mysql/data/mysql" ]; then
            mkdir -p "$D/mysql/data"
            chown -R mysql:mysql "$D/mysql"
            mariadb-install-db --defaults-file="$D/etc/my.cnf" --auth-root-authentication-method=socket \
                --skip-test-db >>"$D/log/mariadb-install.log" 2>&1 ||
                die "mariadb-install-db failed ($D/log/mariadb-install.log)"
        fi
        chown -R mysql:mysql "$D/mysql"
        spawn mariadbd --defaults-file="$D/etc/my.cnf"
    fi
    wait_until 60 mariadbd db -e 'select 1' || die "mariadbd did not start ($D/mysql/mariadb.log)"
    db -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmtestbed';
           CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmtestbed';
           GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
           GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
}

start_dbd() {
    if ! live_pid "$pidf_dbd" slurmdbd >/dev/null; then
        spawn slurmdbd
    fi
    # Poll the port first: a sacctmgr call against a missing slurmdbd retries for many seconds.
    wait_until 60 "slurmdbd port $DBD_PORT" port_open "$DBD_PORT" || die "slurmdbd did not start ($D/log/slurmdbd.log)"
    wait_until 60 "sacctmgr" sacctmgr -n show cluster || die "sacctmgr cannot reach slurmdbd"
}

setup_accounting() {
    local have u users=root
    have=$(sacctmgr -n -P show cluster format=Cluster)
    grep -qxF "$CLUSTER" <<<"$have" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
    have=$(sacctmgr -n -P show account format=Account)
    grep -qxF research <<<"$have" || sacctmgr -i add account research >/dev/null
    have=$(sacctmgr -n -P show user format=User)
    for u in $USERS; do users+=",$u"; done
    local missing=()
    IFS=, read -ra all <<<"$users"
    for u in "${all[@]}"; do grep -qxF "$u" <<<"$have" || missing+=("$u"); done
    if ((${#missing[@]})); then
        sacctmgr -i add user "$(IFS=,; echo "${missing[*]}")" Account=research DefaultAccount=research >/dev/null
    fi
}

ctld_up() { port_open "$CTLD_PORT" && scontrol ping | grep -q 'is UP'; }

start_ctld() {
    if ! live_pid "$pidf_ctld" slurmctld >/dev/null; then
        spawn slurmctld -i
    fi
    wait_until 60 slurmctld ctld_up || die "slurmctld did not start ($D/log/slurmctld.log)"
}

start_slurmds() {
    local n
    for n in "${NODE_NAMES[@]}"; do
        live_pid "$(pidf_slurmd "$n")" slurmd >/dev/null || spawn slurmd -N "$n"
    done
}

# Every node registered: none is unknown, not responding (*), inval or down.
nodes_healthy() {
    local states
    states=$(sinfo -h -N -o '%N %T') || return 1
    [ "$(awk '{ print $1 }' <<<"$states" | sort -u | wc -l)" -eq "$NODES" ] || return 1
    ! grep -qiE '\*|unknown|inval|down|not_responding' <<<"$states"
}

nodes_idle() {
    local states
    states=$(sinfo -h -N -o '%N %T') || return 1
    ! grep -qvE ' idle$' <<<"$states"
}

do_start() {
    [ "$(id -u)" -eq 0 ] || die "must run as root"
    local t0
    t0=$(now)
    installed || do_install
    local u
    for u in $USERS; do id -u "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"; done
    make_dirs
    if any_daemon_running; then
        [ -f "$CONF" ] || die "daemons run but $CONF is missing; run 'stop' first"
    else
        write_config  # fresh start: the knobs win; a running cluster keeps its config (see restart)
    fi
    write_hooks
    link_etc
    start_munge
    start_db
    start_dbd
    setup_accounting
    start_ctld
    start_slurmds
    wait_until 90 "$NODES nodes to register" nodes_healthy || { sinfo -N >&2 || true; die "nodes not healthy"; }
    log "up: $NODES nodes, SLURM_CONF=$CONF (start took $(elapsed "$t0") s)"
}

# ---------------------------------------------------------------- stop / reset / status
do_stop() {
    local t0 pids=() pid n
    t0=$(now)
    pid=$(live_pid "$pidf_ctld" slurmctld) && pids+=("$pid")
    for n in "${NODE_NAMES[@]}"; do
        pid=$(live_pid "$(pidf_slurmd "$n")" slurmd) && pids+=("$pid")
    done
    terminate "${pids[@]}"
    local steps=() s
    mapfile -t steps < <(our_stepds)
    for s in "${steps[@]}"; do
        mapfile -t kids < <(descendants "$s")
        kill -KILL "$s" "${kids[@]}" 2>/dev/null || true
    done
    pids=()
    pid=$(live_pid "$pidf_dbd" slurmdbd) && pids+=("$pid")
    terminate "${pids[@]}"
    pids=()
    pid=$(live_pid "$pidf_db" mariadbd) && pids+=("$pid")
    pid=$(live_pid "$pidf_munge" munged) && pids+=("$pid")
    terminate "${pids[@]}"
    unlink_etc
    log "stopped (${#steps[@]} leftover slurmstepd killed) in $(elapsed "$t0") s"
}

job_ids_open() { squeue -h -o '%A'; }

do_reset() {
    [ "$(id -u)" -eq 0 ] || die "must run as root"
    live_pid "$pidf_ctld" slurmctld >/dev/null || die "cluster not running; use start"
    local t0 ids n
    t0=$(now)
    rm -f "$D"/state/*
    start_slurmds
    mapfile -t ids < <(job_ids_open)
    if ((${#ids[@]})); then scancel "${ids[@]}" 2>/dev/null || true; fi
    no_jobs() { [ -z "$(job_ids_open)" ]; }
    wait_until 90 "jobs to leave the queue" no_jobs || { squeue >&2 || true; die "jobs did not go away"; }
    wait_until 90 "$NODES nodes to register" nodes_healthy_or_drained || die "nodes did not come back"
    while read -r n state; do
        case "$state" in
            *drain* | *down* | *fail*) scontrol update "nodename=$n" state=resume 2>/dev/null || true ;;
        esac
    done < <(sinfo -h -N -o '%N %T' | sort -u)
    wait_until 90 "nodes to be idle" nodes_idle || { sinfo -N >&2 || true; die "nodes not idle"; }
    log "reset done in $(elapsed "$t0") s"
}

# Registered (responding) even if drained or admin-down: those are resumed next.
nodes_healthy_or_drained() {
    local states
    states=$(sinfo -h -N -o '%N %T') || return 1
    ! grep -qiE '\*|unknown|inval|not_responding' <<<"$states"
}

do_status() {
    local up=0 down=0 pid n
    report() {  # report NAME PIDFILE PROGRAM
        if pid=$(live_pid "$2" "$3"); then
            printf '%-12s running (pid %s)\n' "$1" "$pid"; up=$((up + 1))
        else
            printf '%-12s stopped\n' "$1"; down=$((down + 1))
        fi
    }
    report munged "$pidf_munge" munged
    report mariadbd "$pidf_db" mariadbd
    report slurmdbd "$pidf_dbd" slurmdbd
    report slurmctld "$pidf_ctld" slurmctld
    for n in "${NODE_NAMES[@]}"; do report "slurmd $n" "$(pidf_slurmd "$n")" slurmd; done
    echo "SLURM_CONF=$CONF"
    if live_pid "$pidf_ctld" slurmctld >/dev/null; then sinfo -N 2>/dev/null || true; fi
    ((down == 0)) && return 0
    ((up == 0)) && return 3
    return 1
}

do_clean() {
    do_stop
    rm -rf "$D"
    # task/cgroup leaves empty per-node cgroups behind.
    local c n
    for c in /sys/fs/cgroup/*; do
        for n in "${NODE_NAMES[@]}"; do
            if [ -d "$c/slurm_$n" ]; then find "$c/slurm_$n" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
        done
    done
    log "removed $D"
}

# ---------------------------------------------------------------- main
cmd=${1:-}
case "$cmd" in
    install | start | stop | restart | reset | clean)
        [ "$(id -u)" -eq 0 ] || die "must run as root"
        mkdir -p "$(dirname "$D")"
        # Serialise concurrent invocations; fd 8 is closed for every daemon (see spawn).
        exec 8>"$D.op.lock"
        flock 8
        ;;
esac
case "$cmd" in
    install) do_install ;;
    start) do_start ;;
    stop) do_stop ;;
    restart) do_stop; do_start ;;
    reset) do_reset ;;
    status) do_status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    clean) do_clean ;;
    *) echo "usage: $0 {install|start|stop|restart|reset|status|env|clean}" >&2; exit 2 ;;
esac
