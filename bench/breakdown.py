"""Where a resumed link's time to work goes, on each local cluster (ci/local-slurm.sh's table).

    python3 bench/breakdown.py [REPEATS]    # prints one markdown table, a column per release

The link of bench/run.py's real figures (a held job whose predecessor just FAILED and queued it
with its guard), run by bash with its output to a file, but its bootstrap wrapped: the steps
below are timed with the wall clock inside the process (the wrappers cost a few microseconds
each). Medians over REPEATS links (default 15). Standard library only.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import run
from run import rc

# Prepended to the bootstrap: the clock at Python's first line, and a wrapper that times a call.
HEAD = r'''import time as _clock
_started, _steps = _clock.time(), []
def _timed(owner, name, step):
    call = getattr(owner, name)
    def timed(*args, **kwargs):
        began = _clock.time()
        try:
            return call(*args, **kwargs)
        finally:
            _steps.append((step(args) if callable(step) else step, began, _clock.time()))
    setattr(owner, name, timed)
'''
# Before main(): which steps are timed.
BEFORE_MAIN = r'''_steps.append(("the module's load (imports, code)", _started, _clock.time()))
import subprocess as _subprocess
_timed(_subprocess.Popen, "__init__", lambda args: "spawn " + os.path.basename(args[1][0]))
_timed(_subprocess.Popen, "communicate", lambda args: "wait for " + os.path.basename(
    args[0].args[0]))
_timed(os, "fsync", lambda args: "fsync of a directory" if os.path.isdir(
    "/proc/self/fd/%d" % args[0]) else "fsync of a file")
_timed(m, "_read_lookup", "wait for the prologue's scontrol (what Python's start did not cover)")
_timed(m, "lock_kind", "the lock's kind (/proc/mounts)")
_timed(m, "check_owned_dir", "the run directory's owner")
_timed(m.StateStore, "snapshot", "reads of the state files")
_timed(os, "write", "write() of state files")
_timed(os, "replace", "renames")
_timed(os, "fork", "the background step's fork")
'''
# Before os._exit: the steps, to the file the harness names.
AT_EXIT = r'''_steps.append(("end", _clock.time(), _clock.time()))
with open(os.environ["BREAKDOWN_OUT"], "w") as _out:
    json.dump(_steps, _out)
'''


def wrapped_bootstrap():
    code = HEAD + rc.BOOTSTRAP.replace("status = m.main(", BEFORE_MAIN + "status = m.main(")
    code = code.replace("os._exit(status)", AT_EXIT + "os._exit(status)")
    assert code.count("_steps.append") == 3, "the bootstrap changed: update bench/breakdown.py"
    return code


def one_release(environ, repeats):
    """{step: [seconds per link]} on the cluster ``environ`` selects."""
    root = tempfile.mkdtemp(prefix="rc-breakdown-")
    predecessor, holder, guard = run.held_link(environ)
    run_dir = os.path.join(root, "run")
    script = os.path.join(root, "link.sh")
    with open(script, "w") as handle:
        handle.write("#!/bin/bash\n" + rc.render_prologue(run_dir, python=sys.executable).replace(
            rc.shell_quote(run_dir), '"$RUN_DIR"').replace(
            rc.shell_quote(rc.BOOTSTRAP), rc.shell_quote(wrapped_bootstrap())) + run.WORK)
    environ = dict(environ, SLURM_JOB_ID=holder, SLURM_JOB_NAME="rc-bench-succ",
                   SLURM_JOB_DEPENDENCY="afternotok:%s" % predecessor,
                   BENCH_WORK_AT=os.path.join(root, "work-at"),
                   BREAKDOWN_OUT=os.path.join(root, "steps.json"))
    samples = {}
    try:
        with open(os.path.join(root, "job.log"), "w") as log:
            for number in range(repeats):
                run_dir = run.chain_before(os.path.join(root, "run%d" % number), predecessor,
                                           holder, guard)
                started = time.time()
                subprocess.run(["bash", script], env=dict(environ, RUN_DIR=run_dir), stdout=log,
                               stderr=log, check=True)
                work = run.work_started(environ["BENCH_WORK_AT"])
                run.wait_for_background(run_dir)
                with open(environ["BREAKDOWN_OUT"]) as handle:
                    steps = json.load(handle)
                link = {"bash's start, Python's start (to the bootstrap's first line)":
                        steps[0][1] - started}
                for step, began, ended in steps[:-1]:
                    link[step] = link.get(step, 0) + ended - began
                    link["#" + step] = link.get("#" + step, 0) + 1
                link["the rest: Python code (checks, decision, opens, log, exports)"] = (
                    steps[-1][1] - started - sum(value for step, value in link.items()
                                                 if step[0] != "#"))
                link["Python's exit, bash's eval, to the work"] = work - steps[-1][1]
                link["time to work"] = work - started
                for step, value in link.items():
                    samples.setdefault(step, []).append(value)
    finally:
        for name in (rc.GUARD_PREFIX + "rc-bench-succ", "rc-bench-succ", "rc-bench-holder",
                     "rc-bench-guard", "rc-bench-pred"):
            subprocess.run(["scancel", "--name", name], env=environ, stderr=subprocess.DEVNULL)
    return samples


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    columns = {}
    for release, environ in run.releases().items():
        with run.cluster_lock():
            columns[release] = one_release(environ, repeats)
    steps = [step for step in columns[next(iter(columns))] if step[0] != "#"]
    print("| step (median ms, calls) | %s |" % " | ".join(columns))
    print("| --- |%s" % (" --- |" * len(columns)))
    for step in steps:
        print("| %s | %s |" % (step, " | ".join(
            "%.2f%s" % (statistics.median(samples.get(step, [0])) * 1000,
                        " (%d)" % statistics.median(samples["#" + step])
                        if "#" + step in samples else "") for samples in columns.values())))
    print("\n%d links per release; load average %s" % (repeats, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
