"""A chaos run on the local real Slurm cluster: K chains with short links, faults injected at
random times from MENU, then the invariants of tests/histories.py checked from sacct, the
state files and each chain's own work log.

    python3 tests/chaos.py --chains 30 --faults 100 --work 1800 --gap 2 6  # the long run
    python3 tests/chaos.py --chains 3 --faults 6 --seed 1       # CI's short run (a few minutes)

Needs the local cluster (``ci/local-slurm.sh up``) and root (it fails the node, restarts the
daemons); it refuses (exit 2) any cluster ci/local-slurm.sh did not make (tests/local_cluster.py).
``LOCAL_SLURM_RELEASE`` names the release the commands on PATH belong to. Every fault and every
job is printed; the exit status is 1 when an invariant is violated.
"""
import argparse
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]

import resumable_chain as rc  # noqa: E402
from histories import INVARIANTS  # noqa: E402
from local_cluster import not_local_reason  # noqa: E402

LOCAL_SLURM = os.path.join(ROOT, "ci", "local-slurm.sh")
WORK_SECONDS = 100  # each chain's work by default: two one-minute links without faults
MENU = ("node down while links work", "node down while a successor launches",
        "node Prolog fails for the pending successors", "slurmctld restart",
        "slurmdbd stop and start", "preemption", "in-job step SIGKILLed",
        "sbatch fails for a minute", "a person scancels a running link")
WORK = r"""
progress=$(cat {dir}/progress 2>/dev/null || echo 0)
echo "$SLURM_JOB_ID start $(date +%s) $progress" >> {dir}/work.log
while [ "$progress" -lt {seconds} ]; do
    sleep 1
    progress=$((progress + 1))
    echo "$progress" > {dir}/progress.tmp && mv {dir}/progress.tmp {dir}/progress
    echo "$SLURM_JOB_ID tick $(date +%s) $progress" >> {dir}/work.log
done
echo "$SLURM_JOB_ID done $(date +%s) $progress" >> {dir}/work.log
"""


def run(argv, check=True):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    if check and result.returncode != 0:
        raise SystemExit("%s failed: %s" % (" ".join(argv), result.stderr.strip()))
    return result


class Chaos(object):
    def __init__(self, root, chains, seed, work=WORK_SECONDS, minutes=1):
        self.rng, self.root, self.seed, self.work = random.Random(seed), root, seed, work
        self.minutes = minutes
        self.tag = "chaos%x" % (int(time.time()) % 0xFFFFF)
        self.node = run(["hostname", "-s"]).stdout.strip()
        self.hold = "/tmp/local-slurm-prolog-hold.%s" % rc.current_cluster()
        self.prolog_fails = "/tmp/local-slurm-prolog-fail.%s" % rc.current_cluster()
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5))
        self.flag = os.path.join(root, "sbatch-fails")  # while it exists, the jobs' sbatch fails
        wrappers = os.path.join(root, "bin")
        os.makedirs(wrappers)
        with open(os.path.join(wrappers, "sbatch"), "w") as handle:
            handle.write('#!/bin/sh\nif [ -e %s ]; then\n    echo "sbatch: error: Batch job '
                         'submission failed: Socket timed out on send/recv operation" >&2\n'
                         '    exit 1\nfi\nexec %s "$@"\n' % (self.flag, shutil.which("sbatch")))
        os.chmod(os.path.join(wrappers, "sbatch"), 0o755)
        self.chains = [self.chain(number, wrappers) for number in range(chains)]
        self.faults, self.deliberate, self.released, self.resumed = [], {}, [], []
        self.outages = []  # (start, end) of each time the jobs' sbatch failed

    def chain(self, number, wrappers):
        directory = os.path.join(self.root, "c%02d" % number)
        os.makedirs(directory)
        name = "%s-%02d" % (self.tag, number)
        script = os.path.join(directory, "job.sh")
        with open(script, "w") as handle:
            handle.write("#!/bin/bash\n#SBATCH --job-name=%s\n#SBATCH --output=%s/slurm-%%j.out\n"
                         "#SBATCH --time=%d\n#SBATCH -c 1\nexport PATH=%s:$PATH\n" % (
                             name, directory, self.minutes, shlex.quote(wrappers)))
            handle.write(rc.render_prologue(os.path.join(directory, "run"), max_retries=3,
                                            python=sys.executable))
            handle.write(WORK.format(dir=shlex.quote(directory), seconds=self.work))
        job = run(["sbatch", "--parsable", "--requeue", script], check=True).stdout
        return {"name": name, "dir": directory, "run": os.path.join(directory, "run"),
                "first": job.strip().split(";")[0]}

    # ------------------------------------------------------------------ the queue
    def live(self):
        """{job ID: (chain name, state)} of this run's queued or running jobs."""
        out = run(["squeue", "-h", "-o", "%i|%j|%T"], check=False).stdout
        jobs = {}
        for line in out.splitlines():
            fields = line.split("|")
            if len(fields) == 3 and fields[1].startswith((self.tag, rc.GUARD_PREFIX + self.tag)):
                jobs[fields[0]] = (fields[1], fields[2])
        return jobs

    def wait(self, condition, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(1)
        return None

    # ------------------------------------------------------------------ faults
    def inject(self, kind):
        started = time.time()
        hit = getattr(self, "_" + kind.replace(" ", "_").replace("-", "_"))()
        self.faults.append((kind, hit))
        print("%s fault %d: %s: %s" % (time.strftime("%H:%M:%S"), len(self.faults), kind,
                                       hit or "missed"), flush=True)
        return time.time() - started

    def _node(self, state, reason="chaos"):
        run(["scontrol", "update", "nodename=%s" % self.node, "state=%s" % state] +
            (["reason=%s" % reason] if state == "down" else []), check=False)

    def running_links(self):
        """The run's running links (not their guards)."""
        return [job for job, (name, state) in self.live().items()
                if state == "RUNNING" and not name.startswith(rc.GUARD_PREFIX)]

    def _node_down_while_links_work(self):
        running = self.running_links()
        self._node("down")
        time.sleep(3)
        self._node("resume")
        return running and "links %s on the node" % " ".join(sorted(running))

    def _node_down_while_a_successor_launches(self):
        open(self.hold, "w").close()
        try:
            launching = self.wait(self.launching, 90)
            self._node("down")
            time.sleep(3)
        finally:
            os.unlink(self.hold)
            self._node("resume")
        return launching and "job %s held in the node Prolog" % " ".join(launching)

    def _node_Prolog_fails_for_the_pending_successors(self):
        """ci/local-slurm.sh's node Prolog fails for the job IDs in a file: Slurm cancels each
        such job as it launches and drains the node, which an admin then resumes."""
        pending = [job for job, (name, state) in self.live().items()
                   if state == "PENDING" and not name.startswith(rc.GUARD_PREFIX)]
        if not pending:
            return None
        with open(self.prolog_fails, "w") as handle:
            handle.write("".join(job + "\n" for job in pending))
        try:
            failed = self.wait(lambda: [job for job in pending if job not in self.live()], 90)
        finally:
            os.unlink(self.prolog_fails)
            time.sleep(2)
            self._node("resume")
        return failed and "jobs %s" % " ".join(sorted(failed))

    def launching(self):
        """Jobs Slurm started whose batch script has not begun (held in the node Prolog)."""
        directories = {chain["name"]: chain["dir"] for chain in self.chains}
        return [job for job, (name, state) in self.live().items()
                if state in ("CONFIGURING", "RUNNING") and name in directories and not
                os.path.exists(os.path.join(directories[name], "slurm-%s.out" % job))]

    def _slurmctld_restart(self):
        run(["bash", LOCAL_SLURM, "ctld-restart"])
        return "restarted"

    def _slurmdbd_stop_and_start(self):
        run(["bash", LOCAL_SLURM, "dbd-stop"])
        time.sleep(self.rng.randint(10, 40))
        run(["bash", LOCAL_SLURM, "dbd-start"])
        return "down for a while"

    def _preemption(self):
        running = self.running_links()
        run(["sbatch", "--partition=high", "--exclusive", "--job-name=%s-preemptor" % self.tag,
             "--output=/dev/null", "--time=1", "--wrap", "sleep 2"])
        return running and "links %s" % " ".join(sorted(running))

    def _in_job_step_SIGKILLed(self):
        """For 30 s, SIGKILL the first in-job step of every link that starts (once per job)."""
        deadline, killed = time.time() + 30, {}
        while time.time() < deadline:
            for pid in os.listdir("/proc"):
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as handle:
                        words = handle.read().split(b"\0")
                    if b"prologue" not in words or not any(
                            word.startswith(self.root.encode()) for word in words):
                        continue
                    with open("/proc/%s/environ" % pid, "rb") as handle:
                        job = dict(item.split(b"=", 1) for item in handle.read().split(b"\0")
                                   if b"=" in item).get(b"SLURM_JOB_ID", b"?").decode()
                    if job not in killed:
                        os.kill(int(pid), 9)
                        killed[job] = pid
                except (OSError, ValueError):
                    continue
            time.sleep(0.02)
        return killed and "the step of job %s" % " ".join(sorted(killed))

    def _sbatch_fails_for_a_minute(self):
        started = time.time()
        open(self.flag, "w").close()
        time.sleep(60)
        os.unlink(self.flag)
        self.outages.append((started, time.time()))
        return "for 60 s"

    def _a_person_scancels_a_running_link(self):
        running = [(name, job) for job, (name, state) in self.live().items()
                   if state == "RUNNING" and name not in self.deliberate
                   and not name.startswith(rc.GUARD_PREFIX)]
        if not running:
            return None
        name, job = self.rng.choice(sorted(running))
        run(["scancel", job], check=False)
        self.deliberate[name] = "a person scancelled job %s" % job
        return "job %s of %s" % (job, name)

    def release_held(self):
        """Release the run's jobs Slurm held after a launch failure (chaos holds none itself),
        as an admin who resumed the node does and as status tells a person to; their IDs."""
        out = run(["squeue", "-h", "-o", "%i|%j|%r"], check=False).stdout
        held = [fields[0] for fields in (line.split("|", 2) for line in out.splitlines())
                if len(fields) == 3 and fields[2] in rc.HELD_BY_SLURM
                and fields[1].startswith((self.tag, rc.GUARD_PREFIX + self.tag))]
        if held:
            run(["scontrol", "release", ",".join(held)], check=False)
            self.released += held
            print("%s a person releases jobs %s (held by Slurm)" % (
                time.strftime("%H:%M:%S"), " ".join(held)), flush=True)
        return held

    def resume_unqueued(self):
        """Resume, as status tells a person to, each chain whose link could queue neither a
        successor nor a guard because sbatch failed from its prologue until its end (a link as
        short as an outage: nothing could queue anything, as for a person's own sbatch then).
        Any other chain left without a successor stays a violation. Their names."""
        live = set(name for name, _ in self.live().values())
        resumed = []
        for chain in self.chains:
            if chain["name"] in self.resumed or chain["name"] in live or \
                    rc.GUARD_PREFIX + chain["name"] in live or not os.path.isdir(chain["run"]):
                continue
            try:
                record = rc.StateStore(chain["run"]).read_record()
            except rc.StateError:
                continue
            if record is None or record.successor or record.guarded_by or \
                    not record.successor_error or record.action not in rc.WORK_ACTIONS:
                continue
            end = run(["sacct", "-X", "-n", "-P", "-j", record.job, "-o", "End"]).stdout.strip()
            end = time.mktime(time.strptime(end, "%Y-%m-%dT%H:%M:%S")) if end[:1].isdigit() \
                else None
            if end and any(start - 5 <= record.time and end <= stop + rc.RETRY_DELAYS[-1]
                           for start, stop in self.outages):
                run([sys.executable, os.path.join(ROOT, "resumable_chain.py"), "resume",
                     chain["run"]], check=False)
                resumed.append(chain["name"])
                print("%s a person resumes %s (job %s: sbatch failed from its prologue to its "
                      "end)" % (time.strftime("%H:%M:%S"), chain["name"], record.job), flush=True)
        self.resumed += resumed
        return resumed

    # ------------------------------------------------------------------ the run
    def go(self, faults, gap):
        for _ in range(faults):
            if not self.live():
                break
            time.sleep(self.rng.uniform(*gap))
            self.release_held()
            self.resume_unqueued()
            self.inject(self.rng.choice(MENU))
        def ended():
            self.release_held()
            self.resume_unqueued()
            return not self.live()
        self.wait(ended, 20 * 60 * self.minutes)
        time.sleep(10)  # accounting settles
        return self.check()

    def jobs(self, chain):
        """sacct: every run of every job of the chain, oldest first (a successor cancelled
        while pending never started: a query by name and time misses it, so the journal's
        jobs are asked for by ID too)."""
        ids = set(run(["sacct", "-X", "-n", "-P", "--name", chain["name"], "-S", self.started,
                       "-o", "JobIDRaw"]).stdout.split()) | {chain["first"]}
        if os.path.isdir(chain["run"]):
            record = rc.StateStore(chain["run"]).read_record()
            ids |= {job for job in (record.job, record.successor) if job} if record else set()
        out = run(["sacct", "-X", "-D", "-P", "-n", "-j", ",".join(sorted(ids)), "-o",
                   "JobIDRaw,State,ElapsedRaw,ExitCode,AllocCPUS,Submit"]).stdout
        jobs = []
        for line in out.splitlines():
            job_id, state, elapsed, exit_code, cpus, submit = line.split("|")
            jobs.append({"id": job_id, "state": state, "elapsed": int(elapsed or 0),
                         "exit": exit_code, "cpus": int(cpus or 0), "submit": submit})
        return sorted(jobs, key=lambda job: (int(job["id"]), job["submit"]))

    def check(self):
        violations = []
        for chain in self.chains:
            violations += ["%s: invariant %d (%s): %s" % (chain["name"], number,
                                                        INVARIANTS[number], text)
                           for number, text in self.check_chain(chain)]
        return violations

    def check_chain(self, chain):
        jobs, problems = self.jobs(chain), []
        store = rc.StateStore(chain["run"])
        try:
            links, walltime = store.chain_jobs(), store.read_counter(rc.WALLTIME_FILE) or 0
            retries, record = store.read_counter(rc.RETRIES_FILE) or 0, store.read_record()
        except rc.StateError as error:
            return [(2, "a state file does not parse: %s" % error)]
        problems += overlaps(read_file(os.path.join(chain["dir"], "work.log")))
        runs = {}
        for job in jobs:
            runs.setdefault(job["id"], []).append(job)
        problems += counts(runs, links, record, walltime, retries)
        progress = int(read_file(os.path.join(chain["dir"], "progress")) or 0)
        ended = rc.chain_status(chain["run"])["verdict"] if os.path.isdir(chain["run"]) else \
            "no link ran its prologue"
        if progress < self.work and chain["name"] not in self.deliberate and \
                not (record and record.cause == "max_retries"):
            problems.append((3, "work %d of %d s and nothing stopped it on purpose: %s" % (
                progress, self.work, ended)))
        if len(runs) > 4 + self.work // (30 * self.minutes) + 2 * len(self.faults):
            problems.append((3, "%d jobs for %d s of work" % (len(runs), self.work)))
        live = [job for job, (name, _) in self.live().items() if name.startswith(
            (chain["name"], rc.GUARD_PREFIX + chain["name"]))]  # its guards are its jobs too
        if live:
            problems.append((4, "jobs %s still queued" % " ".join(live)))
        problems += [(5, "job %s holds %d CPUs" % (job["id"], job["cpus"]))
                     for job in jobs if job["cpus"] > 1]
        print("%s: %s; walltime %d s, retries %d; %s" % (
            chain["name"], ", ".join("%s %s (%d s)" % (job["id"], job["state"], job["elapsed"])
                                     for job in jobs), walltime, retries, ended), flush=True)
        return problems


def read_file(path):
    if not os.path.exists(path):
        return ""
    with open(path) as handle:
        return handle.read()


def overlaps(worklog):
    """Invariant 1 from the work's own log: each run's [start, last tick] apart from the next."""
    intervals, current = [], None
    for line in worklog.splitlines():
        job, what, stamp = line.split()[:3]
        if what == "start":
            current = [job, int(stamp), int(stamp)]
            intervals.append(current)
        elif current and current[0] == job:
            current[2] = int(stamp)
    return [(1, "job %s worked from %d while job %s worked until %d" % (
        after[0], after[1], before[0], before[2]))
        for before, after in zip(intervals, intervals[1:]) if after[1] < before[2] - 1]


def counts(runs, links, record, walltime, retries):
    """Invariant 2 from sacct: every link its successor saw, counted once (all its runs), and
    the retries the decision table gives for their states."""
    counted = links[:-1] + ([links[-1]] if record and record.job not in links and
                            record.predecessor == links[-1] else [])
    expected, tried = sum(job["elapsed"] for link in counted for job in runs.get(link, [])), 0
    for link in counted:
        last = runs.get(link, [{}])[-1]
        tried = rc.decide(last.get("state") or rc.NOT_VISIBLE, retries=tried,
                          max_retries=3, exit_code=last.get("exit")).retries
    problems = []
    if walltime != expected:
        problems.append((2, "walltime %d, but the counted links %s ran %d s (sacct)" % (
            walltime, " ".join(counted), expected)))
    if retries != tried:
        problems.append((2, "retries %d, the table says %d" % (retries, tried)))
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=3)
    parser.add_argument("--faults", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=int, default=WORK_SECONDS,
                        help="seconds of work per chain")
    parser.add_argument("--minutes", type=int, default=1, help="each link's time limit")
    parser.add_argument("--gap", type=float, nargs=2, default=(5, 25), metavar=("MIN", "MAX"),
                        help="seconds between two faults (uniform)")
    parser.add_argument("--root", help="where the chains' directories go (default: a temp dir)")
    options = parser.parse_args(argv)
    refused = not_local_reason()
    if refused:
        sys.stderr.write("chaos: refused: %s\n" % refused)
        return 2
    root = tempfile.mkdtemp(prefix="rc-chaos-", dir=options.root)
    started = time.time()
    chaos = Chaos(root, options.chains, options.seed, options.work, options.minutes)
    violations = chaos.go(options.faults, options.gap)
    kinds = {}
    for kind, hit in chaos.faults:
        kinds.setdefault(kind, [0, 0])
        kinds[kind][0] += 1
        kinds[kind][1] += bool(hit)
    print("\nchaos run (seed %d): %d chains of %d-minute links, %d faults injected in %.0f s; "
          "%d chains stopped on purpose; %d jobs held by Slurm released by a person; "
          "%d chains resumed by a person after sbatch failed for a link's whole life; "
          "%d violations" % (
              options.seed, options.chains, options.minutes, len(chaos.faults),
              time.time() - started, len(chaos.deliberate), len(chaos.released),
              len(chaos.resumed), len(violations)))
    for kind in MENU:
        injected, hit = kinds.get(kind, (0, 0))
        print("  %-40s injected %3d, hit a job %3d" % (kind, injected, hit))
    for violation in violations:
        print("VIOLATION " + violation)
    if not violations:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
