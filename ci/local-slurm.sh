#!/usr/bin/env bash
# Real single-node Slurm clusters with accounting, for the end-to-end tests and the demo.
#   ci/local-slurm.sh [--release R] up      install or build (if missing) and start munged,
#                                           MariaDB, slurmdbd, slurmctld, slurmd
#   ci/local-slurm.sh [--release R] down    stop this release's daemons (by the PIDs recorded);
#                                           munged and MariaDB only when no other release runs
#   ci/local-slurm.sh [--release R] status  what runs, whether sinfo and sacct answer
#   ci/local-slurm.sh [--release R] dbd-stop|dbd-start   slurmdbd alone (accounting outages)
#   ci/local-slurm.sh [--release R] ctld-restart         slurmctld stopped and started again
#   ci/local-slurm.sh [--release R] env     the PATH and SLURM_CONF lines that select it
#   ci/local-slurm.sh [--release R] build   build (if missing) a release built from source, no more
# R is a release of the table below (default 22.05, Debian's packages; the others are built once
# from ../shared/slurm/<tarball>, checksum verified, into /opt); also LOCAL_SLURM_RELEASE=R.
# All run side by side on this node: own ports, cluster name, state, logs and accounting
# database in the same MariaDB, the same munged.
# Needs root on Debian/Ubuntu. Configured for fast tests: 16 CPUs declared on the node
# (config_overrides) so chains run side by side, two partitions (debug tier 1, high tier 10,
# preempt/partition_prio with PreemptMode=CANCEL), 1 s scheduling, KillWait=2, cred_expire=10;
# with LOCAL_SLURM_SITE_POLICIES=1, job limits enforced and, on one release, RPC rate limiting
# (the policies below the table).
#   ci/local-slurm.sh table   the table's rows: release, cluster name, slurm.conf (the
#                             real-cluster tests run only on a cluster named here, whose
#                             slurm.conf is the one written here, with MARKER as its first line)
set -euo pipefail

# The releases: one row each. TARBALL "-" is Debian's packages (22.05, Debian 12), otherwise
# the source archive built into PREFIX. PORTS are slurmctld,slurmd,slurmdbd.
#       RELEASE TARBALL               PREFIX             ETC                    RUN                    LOGS                 SPOOL                  CLUSTER   PORTS          DATABASE
TABLE="
        22.05   -                     /usr               /etc/slurm             /run/local-slurm       /var/log/slurm       /var/spool             local     6817,6818,6819 slurm_acct_db
        24.11   slurm-24.11.7.tar.xz  /opt/slurm-24.11.7 /opt/slurm-24.11.7/etc /run/local-slurm-24.11 /var/log/slurm-24.11 /var/spool/slurm-24.11 local2411 8817,8818,8819 slurm_acct_db_2411
        26.05   slurm-26.05.3.tar.xz  /opt/slurm-26.05.3 /opt/slurm-26.05.3/etc /run/local-slurm-26.05 /var/log/slurm-26.05 /var/spool/slurm-26.05 local2605 7817,7818,7819 slurm_acct_db_2605"
MARKER="# Written by ci/local-slurm.sh"  # slurm.conf's first line
# Site policies the tests meet (issue 43): per-user job limits enforced on every release, with a
# small MaxSubmitJobs for LIMIT_USER; RPC rate limiting (23.02+) on RATE_LIMITED_RELEASE for
# every plain user (RATE_USER: no job limit). Root's tests meet neither: root has no limit, and
# rate limiting exempts root and SlurmUser (slurmctld/rate_limit.c).
# Only with LOCAL_SLURM_SITE_POLICIES=1 (.ci/run sets it): enforced associations refuse every user
# sacctmgr does not know, so by default (the demo, a new user's trial) any local user may submit.
LIMIT_USER=rclimit LIMIT_JOBS=6 RATE_USER=rcrate PLAIN_USER=rce2eplain
RATE_LIMITED_RELEASE=26.05 RATE_LIMIT=rl_enable,rl_bucket_size=8,rl_refill_rate=1,rl_refill_period=1
SITE_POLICIES=${LOCAL_SLURM_SITE_POLICIES:-0}

HERE=$(cd "$(dirname "$0")" && pwd)
RELEASES=$(awk 'NF {printf "%s%s", sep, $1; sep = " "}' <<<"$TABLE")
RELEASE=${LOCAL_SLURM_RELEASE:-22.05}
if [ "${1:-}" = --release ]; then RELEASE=${2:?--release needs one of: $RELEASES}; shift 2; fi
ROW=$(awk -v release="$RELEASE" '$1 == release' <<<"$TABLE")
if [ -z "$ROW" ]; then
    echo "local-slurm: unknown release '$RELEASE' (one of: $RELEASES)" >&2; exit 2
fi
read -r _ TARBALL_NAME PREFIX ETC RUN LOGS SPOOL CLUSTER PORTS DB <<<"$ROW"
IFS=, read -r -a PORTS <<<"$PORTS"
SHARED_RUN=/run/local-slurm             # PID files of munged and MariaDB (shared)
NODE=$(hostname -s)
DB_PASS=local-slurm-test
TARBALL=""
if [ "$TARBALL_NAME" != - ]; then
    TARBALL=${SLURM_TARBALL:-}
    for candidate in "$HERE/../../shared/slurm" /work/shared/slurm; do  # beside the checkout
        [ -n "$TARBALL" ] || [ ! -f "$candidate/$TARBALL_NAME" ] || TARBALL=$candidate/$TARBALL_NAME
    done
    TARBALL=${TARBALL:-$HERE/../../shared/slurm/$TARBALL_NAME}
fi
CONF=$ETC/slurm.conf
PROLOG_HOLD=/tmp/local-slurm-prolog-hold.$CLUSTER  # while it exists, job launches wait
PROLOG_FAIL=/tmp/local-slurm-prolog-fail.$CLUSTER  # job IDs (a line each) whose node Prolog fails
DBD_CONF=$ETC/slurmdbd.conf
SBIN=$PREFIX/sbin
if [ -n "$TARBALL" ]; then
    export PATH=$PREFIX/bin:$PREFIX/sbin:$PATH SLURM_CONF=$CONF
else  # Debian's: its commands in /usr/bin must win over another release's on PATH
    export SLURM_CONF=$CONF PATH=/usr/bin:/usr/sbin:$PATH
fi

log() { printf 'local-slurm %s: %s\n' "$RELEASE" "$*" >&2; }

fail() {
    log "FAILED: $*"
    for file in "$LOGS"/slurmctld.log "$LOGS"/slurmd.log "$LOGS"/slurmdbd.log /var/log/mysql/error.log \
                "$SHARED_RUN"/mariadb.log "$LOGS"/build.log; do
        [ -f "$file" ] && { log "--- tail of $file"; tail -n 25 "$file" >&2; }
    done
    exit 1
}

alive() {  # alive PIDFILE: its daemon runs. The file outlives a reboot (/run on disk) and its PID
    # may be another process's since: one whose name is not the daemon's is no daemon (CI once
    # found 24.11's slurmd "up" in a stale file, never started it, and waited for its node).
    local pid name
    [ -f "$1" ] && pid=$(cat "$1") && [ -n "$pid" ] || return 1
    name=$(basename "$1" .pid)
    [ "$name" != mariadb ] || name=mariadbd
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds=$1 what=$2; shift 2
    for _ in $(seq "$((seconds * 4))"); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.25
    done
    fail "$what did not come up within ${seconds}s"
}

apt_install() {
    [ "$#" -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || fail "not root: cannot install $*"
    command -v apt-get >/dev/null || fail "no apt-get: install $* by hand"
    log "installing $*"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

install_packages() {
    local missing=() need
    for need in mariadbd:mariadb-server munged:munge; do
        command -v "${need%%:*}" >/dev/null || missing+=("${need#*:}")
    done
    if [ -z "$TARBALL" ]; then
        for need in slurmctld:slurm-wlm slurmdbd:slurmdbd; do
            command -v "${need%%:*}" >/dev/null || missing+=("${need#*:}")
        done
    fi
    apt_install "${missing[@]}"
    [ -z "$TARBALL" ] || build
}

build() {  # once per machine: reused when the install is complete
    [ -x "$SBIN/slurmctld" ] && [ -f "$PREFIX/.built-by-local-slurm" ] && return 0
    [ -f "$TARBALL" ] || fail "no $TARBALL (set SLURM_TARBALL)"
    (cd "$(dirname "$TARBALL")" && sha256sum -c "$(basename "$TARBALL").sha256" >/dev/null) \
        || fail "checksum of $TARBALL does not match $(basename "$TARBALL").sha256"
    local missing=() package
    for package in build-essential libmunge-dev libmariadb-dev libjson-c-dev libdbus-1-dev pkg-config; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    apt_install "${missing[@]}"
    mkdir -p "$LOGS"
    local build
    build=$(mktemp -d /tmp/slurm-build.XXXXXX)
    local source=${TARBALL_NAME%.tar.xz}
    log "building $source (about 5.5 minutes on 2 cores; log in $LOGS/build.log)"
    tar -xJf "$TARBALL" -C "$build"
    (cd "$build/$source" \
        && ./configure --prefix="$PREFIX" --sysconfdir="$ETC" --with-mysql_config=/usr/bin \
               --with-munge=/usr \
        && make -j"$(nproc)" && make install) >"$LOGS/build.log" 2>&1 || fail "build failed"
    rm -rf "$build"
    touch "$PREFIX/.built-by-local-slurm"
}

write_configs() {
    mkdir -p "$ETC" "$LOGS" "$SPOOL/slurmctld" "$SPOOL/slurmd" "$RUN" "$SHARED_RUN"
    local extra=""
    if [ -n "$TARBALL" ]; then
        # A job submitted with --export=NONE gets the system PATH, whose sbatch is 22.05's on
        # this machine (real sites have one release): select this release for every task.
        cat > "$ETC/task-prolog.sh" <<PROLOG
#!/bin/sh
echo "export PATH=$PREFIX/bin:\$PATH"
echo "export SLURM_CONF=$CONF"
PROLOG
        chmod 755 "$ETC/task-prolog.sh"
        printf 'CgroupPlugin=disabled\n' > "$ETC/cgroup.conf"
        extra="TaskProlog=$ETC/task-prolog.sh"
    fi
    if [ "$SITE_POLICIES" = 1 ]; then
        extra+=$'\n'"AccountingStorageEnforce=associations,limits"
        [ "$RELEASE" != "$RATE_LIMITED_RELEASE" ] || extra+=$'\n'"SlurmctldParameters=$RATE_LIMIT"
    fi
    cat > "$CONF" <<CONF
$MARKER: a single-node test cluster, Slurm $RELEASE.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=${PORTS[0]}
SlurmdPort=${PORTS[1]}
SlurmUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
StateSaveLocation=$SPOOL/slurmctld
SlurmdSpoolDir=$SPOOL/slurmd
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
AccountingStoragePort=${PORTS[2]}
JobCompType=jobcomp/none
MpiDefault=none
Prolog=$ETC/node-prolog.sh
$extra
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=16 RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=high Nodes=$NODE MaxTime=INFINITE State=UP PriorityTier=10
CONF
    cat > "$DBD_CONF" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdPort=${PORTS[2]}
SlurmUser=root
LogFile=$LOGS/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=$DB
CONF
    chown root:root "$DBD_CONF"
    chmod 600 "$DBD_CONF"
}

start_munge() {
    alive "$SHARED_RUN/munged.pid" && return 0
    if pgrep -x munged >/dev/null; then return 0; fi
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    wait_for 10 munged test -s /run/munge/munged.pid
    cp /run/munge/munged.pid "$SHARED_RUN/munged.pid"
}

start_mariadb() {
    if ! alive "$SHARED_RUN/mariadb.pid"; then
        mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
        [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
        # its own session: a caller whose process group is killed must not take the database along
        setsid nohup /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
            --pid-file=/run/mysqld/mysqld.pid >"$SHARED_RUN/mariadb.log" 2>&1 &
        echo $! > "$SHARED_RUN/mariadb.pid"
    fi
    wait_for 30 MariaDB mariadb -e 'select 1'
    mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
                GRANT ALL ON $DB.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
}

start_slurmdbd() {
    alive "$RUN/slurmdbd.pid" && return 0
    "$SBIN/slurmdbd"
    wait_for 30 slurmdbd sacctmgr -n list cluster
}

start_slurmctld() {
    alive "$RUN/slurmctld.pid" && return 0
    "$SBIN/slurmctld"
    wait_for 30 slurmctld scontrol ping
}

start_slurmd() {
    alive "$RUN/slurmd.pid" && return 0
    "$SBIN/slurmd"
}

cancel_leftovers() {  # the jobs slurmctld recovered from an earlier run of this cluster
    local jobs
    jobs=$(squeue -h -o %A) || fail "squeue did not answer"
    jobs=$(xargs <<<"$jobs")
    [ -z "$jobs" ] && return 0
    # shellcheck disable=SC2086  # one argument per job ID
    scancel $jobs
    log "cancelled $(wc -w <<<"$jobs") jobs left from an earlier run"
}

add_policy_users() {  # the policy users, each with an account of its own (idempotent)
    local user
    for user in "$LIMIT_USER" "$RATE_USER" "$PLAIN_USER"; do  # PLAIN_USER: no limit, no rate
        id -u "$user" >/dev/null 2>&1 || useradd -M -s /bin/sh "$user"
        sacctmgr -i add account "$user" cluster="$CLUSTER" >/dev/null 2>&1 || true  # or there
        sacctmgr -i add user "$user" account="$user" cluster="$CLUSTER" >/dev/null 2>&1 || true
    done
    sacctmgr -i modify user where name="$LIMIT_USER" cluster="$CLUSTER" \
        set maxsubmitjobs="$LIMIT_JOBS" >/dev/null 2>&1 || true  # "Nothing modified" the 2nd time
    sacctmgr -n -P show assoc where user="$LIMIT_USER" cluster="$CLUSTER" format=maxsubmit \
        | grep -qx "$LIMIT_JOBS" || fail "$LIMIT_USER has no MaxSubmitJobs=$LIMIT_JOBS"
}

node_idle() { sinfo -h -n "$NODE" -o %T | grep -Eq '^(idle|mixed|allocated)'; }

write_node_prolog() {
    # The node Prolog holds a job's launch while the flag file exists: tests fail the node while
    # Slurm is still launching a job (its batch script has not started). It fails for the jobs
    # named in PROLOG_FAIL (Slurm then drains the node and requeues the job held).
    cat > "$ETC/node-prolog.sh" <<PROLOG
#!/bin/sh
while [ -e "$PROLOG_HOLD" ]; do sleep 1; done
if [ -e "$PROLOG_FAIL" ] && grep -qx "\$SLURM_JOB_ID" "$PROLOG_FAIL"; then exit 1; fi
exit 0
PROLOG
    chmod 755 "$ETC/node-prolog.sh"
}

up() {
    if alive "$SHARED_RUN/munged.pid" && alive "$SHARED_RUN/mariadb.pid" && alive "$RUN/slurmdbd.pid" \
        && alive "$RUN/slurmctld.pid" && alive "$RUN/slurmd.pid" && node_idle \
        && sacct -n -X -j 1 >/dev/null 2>&1; then
        if [ "$(id -u)" -eq 0 ]; then
            write_node_prolog  # read at every launch: no restart needed
            add_policy_users  # slurm.conf's policies themselves wait for a fresh start
        fi
        log "already up"
        return 0
    fi
    [ "$(id -u)" -eq 0 ] || fail "must run as root"
    install_packages
    write_configs
    write_node_prolog
    # A test killed mid-way (a stopped session, a CI timeout) leaves its flag files, jobs and a
    # drained node in the saved state: a fresh start begins clean, or every test waits on them.
    # Not a running cluster's (its node drained or slurmdbd stopped by a test under way).
    local fresh=1
    if alive "$RUN/slurmctld.pid"; then fresh=0; fi
    [ "$fresh" -eq 0 ] || rm -f "$PROLOG_HOLD" "$PROLOG_FAIL"
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurmctld
    add_policy_users
    [ "$fresh" -eq 0 ] || cancel_leftovers
    start_slurmd
    scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
    wait_for 30 "slurmd registration (node idle)" node_idle
    wait_for 30 "sacct" sacct -n -X -S now
    log "up: $(sinfo -h -o '%P %a %D %T' | tr '\n' ';') $(sbatch --version)"
}

other_release_runs() {
    local other
    while read -r _ _ _ _ other _; do
        [ -z "$other" ] || [ "$other" = "$RUN" ] && continue
        alive "$other/slurmctld.pid" || alive "$other/slurmd.pid" || alive "$other/slurmdbd.pid" \
            && return 0
    done <<<"$TABLE"
    return 1
}

stop_pidfile() {  # stop_pidfile NAME PIDFILE
    if alive "$2"; then
        kill "$(cat "$2")" 2>/dev/null || true
        for _ in $(seq 40); do alive "$2" || break; sleep 0.25; done
        log "stopped $1"
    fi
    rm -f "$2"
}

down() {
    local daemon
    for daemon in slurmd slurmctld slurmdbd; do
        stop_pidfile "$daemon" "$RUN/$daemon.pid"
    done
    if other_release_runs; then
        log "munged and MariaDB kept: the other release still uses them"
        return 0
    fi
    stop_pidfile mariadb "$SHARED_RUN/mariadb.pid"
    stop_pidfile munged "$SHARED_RUN/munged.pid"
}

status() {
    local daemon file
    for daemon in munged mariadb slurmdbd slurmctld slurmd; do
        file=$RUN/$daemon.pid
        case "$daemon" in munged|mariadb) file=$SHARED_RUN/$daemon.pid ;; esac
        if alive "$file"; then echo "$daemon: running (pid $(cat "$file"))"; else echo "$daemon: stopped"; fi
    done
    sinfo -h -o '%P %a %D %T' 2>&1 | sed 's/^/sinfo: /'
    if sacct -n -X -S now >/dev/null 2>&1; then echo "sacct: answers"; else echo "sacct: not answering"; fi
}

stop_dbd() {  # for the accounting-outage tests: slurmctld queues records and replays them later
    if alive "$RUN/slurmdbd.pid"; then
        kill "$(cat "$RUN/slurmdbd.pid")"
        for _ in $(seq 40); do alive "$RUN/slurmdbd.pid" || break; sleep 0.25; done
    fi
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    dbd-stop) stop_dbd ;;
    dbd-start) start_slurmdbd ;;
    ctld-restart) stop_pidfile slurmctld "$RUN/slurmctld.pid"; start_slurmctld ;;
    env) printf 'export PATH=%s\nexport SLURM_CONF=%s\n' \
             "$([ -n "$TARBALL" ] && echo "$PREFIX/bin:")\$PATH" "$CONF" ;;
    build) [ -z "$TARBALL" ] || build ;;
    table) awk -v marker="$MARKER" 'NF {print $1, $8, $4 "/slurm.conf"} END {print "marker", marker}' \
               <<<"$TABLE" ;;
    *) echo "usage: $0 [--release ${RELEASES// /|}] up|down|status|dbd-stop|dbd-start|ctld-restart|env|build|table" >&2
       exit 2 ;;
esac
