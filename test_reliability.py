"""Adversarial reliability suite: crash injection, corrupt and hostile state, outages, races and
fuzzing. Each part prints how many cases it ran (see the README's reliability section)."""
import errno
import glob
import json
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

import resumable_chain as rc
from test_prologue import read, start_chain

SEED = 20261130
FAST_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

# --------------------------------------------------------------------------- crash injection


class InProcessSlurm(object):
    """A fake of run_slurm for forked children: predecessor states fixed, submissions on disk."""

    def __init__(self, root, states):
        self.submitted = os.path.join(root, "submitted")
        self.states = states  # {job ID: (state, elapsed)}

    def __call__(self, argv, timeout=None, environ=None, submit=False, cwd=None):
        command = argv[0]
        if command == "sacct":
            job_id = argv[argv.index("-j") + 1]
            state, elapsed = self.states[job_id]
            return rc.SlurmResult(0, "%s|%s|%d|2026-11-30T00:00:00|2026-11-30T00:00:00|"
                                  "2026-11-30T01:00:00\n" % (job_id, state, elapsed), "")
        if command == "sbatch":
            dependency = [a for a in argv if a.startswith("--dependency=")][0].split(":")[1]
            with open(self.submitted, "a") as handle:
                successor = str(5000 + sum(1 for _ in open(self.submitted)) if os.path.exists(
                    self.submitted) else 5000)
                handle.write("%s %s\n" % (successor, dependency))
                handle.flush()
            rc._checkpoint()  # killed here: Slurm queued it, the job never heard back
            return rc.SlurmResult(0, successor + "\n", "")
        if command == "squeue":
            return rc.SlurmResult(0, "".join("%s|afternotok:%s(unfulfilled)\n" % tuple(line.split())
                                             for line in self.lines()), "")
        if command == "scontrol":
            return rc.SlurmResult(0, "JobId=%s JobState=RUNNING TimeLimit=UNLIMITED\n" % argv[-1], "")
        return rc.SlurmResult(1, "", "unexpected %s" % command)

    def lines(self):
        if not os.path.exists(self.submitted):
            return []
        with open(self.submitted) as handle:
            return [line for line in handle if line.strip()]

    def successors_of(self, job_id):
        return [line.split()[0] for line in self.lines() if line.split()[1] == job_id]


def run_in_child(run_dir, job_id, predecessor, slurm, kill_at=None, kill_after=None, restart=0):
    """Run the in-job step in a forked child; return its exit status or -9 when killed."""
    pid = os.fork()
    if pid == 0:  # child
        status = 99
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            rc.run_slurm = slurm
            os.environ.pop(rc.CRASH_ENV, None)
            if kill_at:
                os.environ[rc.CRASH_ENV] = str(kill_at)
            environ = {"SLURM_JOB_ID": job_id, "SLURM_JOB_NAME": "crash",
                       "SLURM_RESTART_COUNT": str(restart)}
            if predecessor:
                environ["SLURM_JOB_DEPENDENCY"] = "afternotok:%s" % predecessor
            spec = rc.SuccessorSpec("/bin/true", [], [], "crash")
            try:
                status = rc.run_link(run_dir, 3, None, spec, environ)
            except rc.StateError:
                status = 2
        finally:
            os._exit(status)
    if kill_after is not None:
        time.sleep(kill_after)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def seed_chain(run_dir):
    os.makedirs(run_dir)
    store = rc.StateStore(run_dir)
    store.write_text(rc.CHAIN_FILE, "100\n")
    store.write_counter(rc.WALLTIME_FILE, 1000)
    store.write_counter(rc.RETRIES_FILE, 1)
    store.write_journal({"job": "100", "predecessor": None, "state": None, "action": "start",
                         "reason": "", "walltime": 1000, "retries": 1, "successor": "200",
                         "phase": "queued", "max_retries": 3, "max_walltime": None})


def check_after_recovery(run_dir, slurm, next_link):
    """The invariants after a killed run of job 200 and the recovery run that followed."""
    store = rc.StateStore(run_dir)
    assert store.chain_jobs()[:2] == ["100", "200"]
    walltime, retries = store.read_counter(rc.WALLTIME_FILE), store.read_counter(rc.RETRIES_FILE)
    if next_link == "rerun":
        assert (walltime, retries) == (1050, 2)
    else:
        assert (walltime, retries) == (1060, 2) and store.chain_jobs() == ["100", "200", "300"]
    for job in ("200", "300"):
        assert len(slurm.successors_of(job)) <= 1, slurm.lines()


@pytest.mark.parametrize("next_link", ["rerun", "successor"])
def test_crash_injection(tmp_path_factory, next_link, capsys):
    rng = random.Random(SEED)
    base = tmp_path_factory.mktemp("crash", numbered=True)
    root = FAST_DIR and os.path.join(FAST_DIR, "rc-crash-%d-%s" % (os.getpid(), next_link)) or str(base)
    os.makedirs(root, exist_ok=True)
    states = {"100": ("FAILED", 50), "200": ("TIMEOUT", 10)}
    # Count the checkpoints of one clean run, then kill at each of them and at random instants.
    probe = os.path.join(root, "probe")
    seed_chain(probe)
    assert run_in_child(probe, "200", "100", InProcessSlurm(probe, states)) == 0
    checkpoints = rc_checkpoints_of(probe, states)
    trials = [("checkpoint", point) for point in range(1, checkpoints + 1)] * 20
    trials += [("instant", rng.uniform(0, 0.004)) for _ in range(600)]
    killed = completed = 0
    for number, (kind, point) in enumerate(trials):
        run_dir = os.path.join(root, "t%d" % number)
        seed_chain(run_dir)
        slurm = InProcessSlurm(run_dir, states)
        status = run_in_child(run_dir, "200", "100", slurm,
                              kill_at=point if kind == "checkpoint" else None,
                              kill_after=point if kind == "instant" else None)
        killed += status == -signal.SIGKILL
        completed += status == 0
        assert status in (0, -signal.SIGKILL), (kind, point, status)
        if next_link == "rerun":
            assert run_in_child(run_dir, "200", "100", slurm, restart=1) == 0, (kind, point)
        elif slurm.successors_of("200"):
            assert run_in_child(run_dir, "300", "200", slurm) == 0, (kind, point)
        else:  # killed before the successor was queued: rerun, then the successor
            assert run_in_child(run_dir, "200", "100", slurm, restart=1) == 0, (kind, point)
            assert run_in_child(run_dir, "300", "200", slurm) == 0, (kind, point)
        check_after_recovery(run_dir, slurm, next_link)
        subprocess.call(["rm", "-rf", run_dir])
    subprocess.call(["rm", "-rf", root])
    with capsys.disabled():
        print("\ncrash injection (%s): %d checkpoints x 20 + 600 random instants = %d kills "
              "tried, %d killed mid-step, %d finished first" % (
                  next_link, checkpoints, len(trials), killed, completed))
    assert killed >= checkpoints * 20


def rc_checkpoints_of(run_dir, states):
    """How many checkpoints one clean in-job step passes (killing past the last one is a no-op)."""
    for point in range(1, 200):
        fresh = run_dir + "-count%d" % point
        seed_chain(fresh)
        if run_in_child(fresh, "200", "100", InProcessSlurm(fresh, states), kill_at=point) == 0:
            return point - 1
    raise AssertionError("no end of checkpoints")
