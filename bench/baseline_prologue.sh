#!/bin/bash
# The reference prologue as the seed describes it, for side-by-side figures only: two sacct
# calls per link (state, then elapsed), fixed 10 s sleeps between up to six tries, one sbatch.
# Usage inside a job: baseline_prologue.sh RUN_DIR MAX_RETRIES; exits 0 to run the work,
# 3 when the chain ends cleanly, 1 when it fails.
run_dir=$1
max_retries=${2:-3}
mkdir -p "$run_dir"
prev=${SLURM_JOB_DEPENDENCY#afternotok:}
[ "$prev" = "${SLURM_JOB_DEPENDENCY:-}" ] && prev=""
state=""
if [ -n "$prev" ]; then
    for _ in 1 2 3 4 5 6; do
        state=$(sacct -j "$prev" -n -X -P -o State | head -n 1)
        [ -n "$state" ] && break
        sleep 10
    done
    elapsed=$(sacct -j "$prev" -n -X -P -o ElapsedRaw | head -n 1)
    walltime=$(cat "$run_dir/.gym_accumulated_walltime" 2>/dev/null || echo 0)
    echo $((walltime + ${elapsed:-0})) > "$run_dir/.gym_accumulated_walltime"
fi
retries=$(cat "$run_dir/.gym_infra_retries" 2>/dev/null || echo 0)
case "$state" in
    "") [ -n "$prev" ] || { echo 0 > "$run_dir/.gym_infra_retries"; : > "$run_dir/.gym_job_chain"; } ;;
    COMPLETED) exit 3 ;;
    CANCELLED*) exit 3 ;;
    TIMEOUT|PREEMPTED|NODE_FAIL) ;;
    *) retries=$((retries + 1)); echo "$retries" > "$run_dir/.gym_infra_retries"
       [ "$retries" -gt "$max_retries" ] && exit 1 ;;
esac
echo "$SLURM_JOB_ID" >> "$run_dir/.gym_job_chain"
sbatch --dependency="afternotok:$SLURM_JOB_ID" --kill-on-invalid-dep=yes "$0" >/dev/null \
    || echo "Chain will NOT continue on failure" >&2
exit 0
