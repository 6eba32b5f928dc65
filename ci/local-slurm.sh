#!/usr/bin/env bash
# A real single-node Slurm cluster with accounting, for the end-to-end tests and the demo.
#   ci/local-slurm.sh up      install (if missing) and start munged, MariaDB, slurmdbd, slurmctld, slurmd
#   ci/local-slurm.sh down    stop the daemons this script started (by the PIDs it recorded)
#   ci/local-slurm.sh status  print what runs and whether sinfo and sacct answer
#   ci/local-slurm.sh dbd-stop|dbd-start   stop or start slurmdbd alone (accounting outage tests)
# Needs root on Debian/Ubuntu. Configured for fast tests: 16 CPUs declared on the node
# (config_overrides) so chains run side by side, two partitions (debug tier 1, high tier 10,
# preempt/partition_prio with PreemptMode=CANCEL), 1 s scheduling, KillWait=2, cred_expire=10.
set -euo pipefail

RUN=/run/local-slurm                    # PID files of the daemons this script started
CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
LOGS=/var/log/slurm
NODE=$(hostname -s)
DB_PASS=local-slurm-test

log() { printf 'local-slurm: %s\n' "$*" >&2; }

fail() {
    log "FAILED: $*"
    for file in "$LOGS"/slurmctld.log "$LOGS"/slurmd.log "$LOGS"/slurmdbd.log /var/log/mysql/error.log "$RUN"/mariadb.log; do
        [ -f "$file" ] && { log "--- tail of $file"; tail -n 25 "$file" >&2; }
    done
    exit 1
}

alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds=$1 what=$2; shift 2
    for _ in $(seq "$((seconds * 4))"); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.25
    done
    fail "$what did not come up within ${seconds}s"
}

install_packages() {
    local missing=()
    for command in slurmctld:slurm-wlm slurmdbd:slurmdbd mariadbd:mariadb-server munged:munge; do
        command -v "${command%%:*}" >/dev/null || missing+=("${command#*:}")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || fail "not root: cannot install ${missing[*]}"
    command -v apt-get >/dev/null || fail "no apt-get: install ${missing[*]} by hand"
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

write_configs() {
    mkdir -p /etc/slurm "$LOGS" /var/spool/slurmctld /var/spool/slurmd "$RUN"
    cat > "$CONF" <<CONF
# Written by ci/local-slurm.sh: a single-node test cluster.
ClusterName=local
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=64
SlurmdParameters=config_overrides
SchedulerParameters=sched_interval=1,bf_interval=1
KillWait=2
OverTimeLimit=0
InactiveLimit=0
MinJobAge=300
ReturnToService=2
JobRequeue=1
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
MpiDefault=none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=16 RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=high Nodes=$NODE MaxTime=INFINITE State=UP PriorityTier=10
CONF
    cat > "$DBD_CONF" <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
LogFile=$LOGS/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
CONF
    chown root:root "$DBD_CONF"
    chmod 600 "$DBD_CONF"
}

start_munge() {
    alive munged && return 0
    if pgrep -x munged >/dev/null; then return 0; fi
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    wait_for 10 munged test -s /run/munge/munged.pid
    cp /run/munge/munged.pid "$RUN/munged.pid"
}

start_mariadb() {
    if ! alive mariadb; then
        mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
        [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
        nohup /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
            --pid-file=/run/mysqld/mysqld.pid >"$RUN/mariadb.log" 2>&1 &
        echo $! > "$RUN/mariadb.pid"
    fi
    wait_for 30 MariaDB mariadb -e 'select 1'
    mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
                GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
}

start_slurmdbd() {
    alive slurmdbd && return 0
    /usr/sbin/slurmdbd
    wait_for 30 slurmdbd sacctmgr -n list cluster
}

start_slurmctld() {
    alive slurmctld && return 0
    /usr/sbin/slurmctld
    wait_for 30 slurmctld scontrol ping
}

start_slurmd() {
    alive slurmd && return 0
    /usr/sbin/slurmd
}

node_idle() { sinfo -h -n "$NODE" -o %T | grep -Eq '^(idle|mixed|allocated)'; }

up() {
    if alive munged && alive mariadb && alive slurmdbd && alive slurmctld && alive slurmd \
        && node_idle && sacct -n -X -j 1 >/dev/null 2>&1; then
        log "already up"
        return 0
    fi
    [ "$(id -u)" -eq 0 ] || fail "must run as root"
    install_packages
    write_configs
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurmctld
    start_slurmd
    wait_for 30 "slurmd registration (node idle)" node_idle
    scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
    wait_for 30 "sacct" sacct -n -X -S now
    log "up: $(sinfo -h -o '%P %a %D %T' | tr '\n' ';')"
}

down() {
    for daemon in slurmd slurmctld slurmdbd mariadb munged; do
        if alive "$daemon"; then
            kill "$(cat "$RUN/$daemon.pid")" 2>/dev/null || true
            for _ in $(seq 40); do alive "$daemon" || break; sleep 0.25; done
            log "stopped $daemon"
        fi
        rm -f "$RUN/$daemon.pid"
    done
}

status() {
    for daemon in munged mariadb slurmdbd slurmctld slurmd; do
        if alive "$daemon"; then echo "$daemon: running (pid $(cat "$RUN/$daemon.pid"))"; else echo "$daemon: stopped"; fi
    done
    sinfo -h -o '%P %a %D %T' 2>&1 | sed 's/^/sinfo: /'
    if sacct -n -X -S now >/dev/null 2>&1; then echo "sacct: answers"; else echo "sacct: not answering"; fi
}

stop_dbd() {  # for the accounting-outage tests: slurmctld queues records and replays them later
    if alive slurmdbd; then
        kill "$(cat "$RUN/slurmdbd.pid")"
        for _ in $(seq 40); do alive slurmdbd || break; sleep 0.25; done
    fi
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    dbd-stop) stop_dbd ;;
    dbd-start) start_slurmdbd ;;
    *) echo "usage: $0 up|down|status|dbd-stop|dbd-start" >&2; exit 2 ;;
esac
