#!/usr/bin/env bash
# Record the real Slurm outputs the tests read, on the local cluster of one release (as root):
#   eval "$(bash ci/local-slurm.sh --release R env)"; bash tests/slurm_outputs/record.sh R
# writes tests/slurm_outputs/R/*.txt with capture.sh (the same names and commands as the 22.05
# and 26.05 recordings) and R/sbatch-options.txt with probe_sbatch_options.py. About 3 minutes:
# it waits for a one-minute job's TIMEOUT. It drains and resumes the node (a node Prolog that
# fails, a node down during a launch): only on the project's local cluster (ci/local-slurm.sh).
set -euo pipefail
release=${1:?usage: record.sh RELEASE}
here=$(cd "$(dirname "$0")" && pwd)
python3 -c "import sys; sys.path.insert(0, '$here/..'); import local_cluster as l
reason = l.not_local_reason()
sys.exit('record.sh: refused: %s' % reason if reason else 0)"
sbatch --version | grep -q "${release//./\\.}" || { echo "record.sh: sbatch is $(sbatch --version), not $release" >&2; exit 2; }
capture() { bash "$here/capture.sh" "$release" "$@"; }
cluster=$(scontrol show config | awk '$1 == "ClusterName" {print $3}')
node=$(sinfo -h -o %n | head -n 1)
prolog_hold=/tmp/local-slurm-prolog-hold.$cluster prolog_fail=/tmp/local-slurm-prolog-fail.$cluster
tag=${release%%.*}
state() { scontrol show job -o "$1" | tr ' ' '\n' | sed -n 's/^JobState=//p'; }
wait_state() {  # wait_state JOB STATE...: until the job is in one of them (2 minutes at most)
    local job=$1; shift
    for _ in $(seq 240); do
        case " $* " in *" $(state "$job") "*) return 0 ;; esac
        sleep 0.5
    done
    echo "record.sh: job $job never got to $* (it is $(state "$job"))" >&2; exit 1
}
submit() { sbatch --parsable "$@" | cut -d';' -f1; }

rm -rf /tmp/cap /tmp/rcprobe && mkdir -p /tmp/cap /tmp/rcprobe
cd /tmp/cap
printf '#!/bin/bash\nsleep 2\n' > ok.sh
printf '#!/bin/bash\nexit 3\n' > fail.sh
printf '#!/bin/bash\nsleep 600\n' > long.sh
printf '#!/bin/bash\ntrue\n' > /tmp/rcprobe/job.sh
printf '#!/bin/bash\ntrue\n' > /tmp/sq_test.sh
out=/tmp/cap/$tag-%j.out

# A chain's jobs: completed, failed, timed out, cancelled for a dependency never met, held, and
# the successor of the timed-out one.
capture sbatch-parsable sbatch --parsable -J rc-cap-ok -o "$out" ok.sh
ok=$(tail -n +3 "$here/$release/sbatch-parsable.txt" | head -n 1)
failed=$(submit -J rc-cap-fail -o "$out" fail.sh)
long=$(submit -J rc-cap-timeout --time=1 -o "$out" long.sh)
dep=$(submit -J rc-cap-dep --dependency=afternotok:"$ok" --kill-on-invalid-dep=yes -o "$out" ok.sh)
held=$(submit --hold -J rc-cap-held -o "$out" ok.sh)
after=$(submit -J rc-cap-after --dependency=afternotok:"$long" -o "$out" ok.sh)
capture sbatch-refused sbatch --parsable -p nosuch -o "$out" ok.sh
capture sbatch-unknown-dependency sbatch --parsable --dependency=afternotok:999999 -o "$out" ok.sh
capture sbatch-unknown-option sbatch --test-only --nosuch x
capture scontrol-show-partition scontrol show partition -o
capture scontrol-show-partition-unknown scontrol show partition -o nosuch
wait_state "$long" RUNNING
wait_state "$ok" COMPLETED
wait_state "$dep" CANCELLED
sleep 8
capture scontrol-running scontrol show job -o "$long"
capture squeue-chain squeue -h -j "$after,$long" -o '%i|%T|%M|%S|%l|%E|%r'
capture squeue-pending-dependents squeue -h -u root -t PENDING -o '%i|%T|%M|%S|%l|%E|%r'
capture scontrol-completed scontrol show job -o "$ok"
capture scontrol-failed scontrol show job -o "$failed"
capture scontrol-dependency-cancelled scontrol show job -o "$dep"
capture scontrol-held scontrol show job -o "$held"
capture scontrol-unknown scontrol show job -o 999999
capture sacct-unknown sacct -j 999999 -X -D -P -n -o JobID,State,ElapsedRaw,Submit,Start,End
capture scontrol-show-config scontrol show config

# Exit codes: 75, 76, and a batch script killed by a signal.
e75=$(submit -o /dev/null --wrap 'exit 75')
e76=$(submit -o /dev/null --wrap 'exit 76')
killed=$(submit -o /dev/null --wrap 'kill -9 $$')
for job in "$e75" "$e76" "$killed"; do wait_state "$job" FAILED; done
capture scontrol-exit-75 scontrol show job -o "$e75"
capture scontrol-exit-76 scontrol show job -o "$e76"
capture scontrol-killed-by-signal scontrol show job -o "$killed"
sleep 2
capture sacct-exit-codes sacct -j "$e75,$e76,$killed" -X -D -P -n \
    -o JobID,State,ElapsedRaw,Submit,Start,End,ExitCode,NodeList

# Why pending jobs wait: held, running, and a dependent of the running one; held jobs by script.
reason_held=$(submit --hold -o /dev/null --wrap true)
running=$(submit -o /dev/null --wrap 'sleep 20')
dependent=$(submit --dependency=afternotok:"$running" -o /dev/null --wrap true)
probe_held=$(submit --hold -o /dev/null /tmp/rcprobe/job.sh)
probe_dependent=$(submit --dependency=afternotok:"$probe_held" -o /dev/null /tmp/rcprobe/job.sh)
other_held=$(submit --hold -o /dev/null /tmp/sq_test.sh)
wait_state "$running" RUNNING
capture squeue-reasons squeue -h -j "$reason_held,$running,$dependent" -o '%i|%T|%M|%S|%l|%E|%r'
capture squeue-held-by-script squeue -h -u root -t PENDING -o '%i|%o|%r'
echo "held by /tmp/rcprobe/job.sh: $probe_held"

# The timed-out job and the chain (before the node is disturbed: a node down kills its jobs).
wait_state "$long" TIMEOUT
wait_state "$after" COMPLETED
sleep 3
capture scontrol-timeout scontrol show job -o "$long"
capture sacct-chain sacct -j "$ok,$failed,$long,$dep,$held,$after" -X -D -P -n \
    -o JobID,State,ElapsedRaw,Submit,Start,End
scancel "$running" 2>/dev/null || true

# A --no-requeue job whose node Prolog fails (slurmd cancels it, drains the node), and a held job
# a person cancels before it starts.
launch=$(submit --hold --no-requeue -o /dev/null --wrap true)
echo "$launch" >> "$prolog_fail"
scontrol release "$launch"
never=$(submit --hold -o /dev/null --wrap true)
scancel "$never"
wait_state "$launch" CANCELLED FAILED NODE_FAIL
rm -f "$prolog_fail"
sleep 3
scontrol update nodename="$node" state=resume  # the failed Prolog drained it

# A job whose node fails during its launch (the node Prolog holds it): requeued, then COMPLETED.
touch "$prolog_hold"
requeued=$(submit -o /dev/null --wrap true)
wait_state "$requeued" CONFIGURING RUNNING
scontrol update nodename="$node" state=down reason=record.sh
sleep 3
rm -f "$prolog_hold"
scontrol update nodename="$node" state=resume || true  # ReturnToService=2 may have resumed it
wait_state "$requeued" COMPLETED
capture sacct-launch-failed sacct -j "$launch,$never" -X -D -P -n \
    -o JobID,State,ElapsedRaw,Submit,Start,End,ExitCode,NodeList
capture sacct-requeued-at-launch sacct -j "$requeued" -D -X -P -n -o JobIDRaw,State,NodeList
scancel "$held" "$reason_held" "$dependent" "$probe_held" "$probe_dependent" "$other_held" 2>/dev/null \
    || true

shopt -s nullglob  # the source archive, for the option names in no help text
tarballs=("$here"/../../../shared/slurm/slurm-"$release".*.tar.xz /work/shared/slurm/slurm-"$release".*.tar.xz)
tarball=${SLURM_TARBALL:-${tarballs[0]:?no source archive of Slurm $release: set SLURM_TARBALL}}
python3 "$here/probe_sbatch_options.py" "$(command -v sbatch)" "$tarball" > "$here/$release/sbatch-options.txt"
echo "recorded in $here/$release"
