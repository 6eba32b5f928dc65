"""Randomized fault histories of one chain, against the fake Slurm, checked after every step.

Each history is one chain driven from its first job to its end by a small
scheduler that behaves as Slurm does for these jobs (afternotok, afterany,
kill-on-invalid-dep, requeue of a job queued with --requeue, holds), with the
real in-job step (``run_link``, in-process), the guards' step (``guard_chain``)
and the real operations (``status``,
``cancel``, ``resume``) interleaved as "another node" would run them. Faults
are drawn from FAULTS at every link; the invariants (INVARIANTS) are checked
after every step. A history is fully determined by its seed: a violation
prints the seed and the history, and ``--seed S --histories 1`` replays it.

Lagging views (an NFS client's attribute and entry caches, up to 60 s): each
process of the chain (a link's prologue, its rerun after a kill, the background
step (and its own-guard step), the exit trap, a guard, and so the links a guard or
``resume`` queues) may be drawn to see the run directory's state files as an
earlier step of the history left them (1-3 steps back, among the states that
were current within the last LAG_SECONDS of the history's time), until its own
clock (its pauses: the module's view waits, a guard's tries) has
run for a drawn 1-LAG_SECONDS s. Every state file read goes through
``StateStore.read_bytes``, which returns the stale bytes (or "missing") then;
files the process wrote itself read as they are (a client sees its own
writes), and locks and Slurm are never stale. The module re-reads a lagging
view (``wait_for_view``, ``wait_to_be_named``) on the process's clock.

    python3 tests/histories.py --histories 100000 --seed 1 --workers 2

The fast suite runs a few hundred (test_reliability.py::test_random_histories;
``pytest --histories N --history-seed S`` runs more).
"""
import argparse
import contextlib
import os
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import resumable_chain as rc  # noqa: E402
import fake_slurm  # noqa: E402

INVARIANTS = {
    1: "never two links doing work at the same time for one run directory",
    2: "every link counted exactly once toward walltime; retries as the decision table says; "
       "state files parse",
    3: "with survivable faults only, the work completes within a bounded number of links",
    4: "when the chain ends, none of its jobs is queued or running",
    5: "no job that does not do the work holds the links' resources",
}

# What ends a link that works (weights), when its work is not finished first.
ENDS = (("TIMEOUT", 8), ("PREEMPTED", 2), ("NODE_FAIL", 2), ("FAILED", 2),
        ("OUT_OF_MEMORY", 1), ("exit 75", 1), ("exit 76", 0.3))
# Faults drawn at each link (probabilities); the survivable ones leave invariant 3 standing.
FAULTS = {
    "lag": 0.08,  # the controller forgot the predecessor; accounting shows it a moment later
    "lag beyond the window": 0.02,  # accounting shows it only after the lookup window
    "forgotten": 0.1,  # the controller forgot the predecessor; accounting has it
    "accounting outage": 0.02,  # ... and slurmdbd is down until the next prologue ran
    "death before prologue": 0.06,  # node failure / boot failure while Slurm launches it
    "launch failure": 0.02,  # node Prolog failed: Slurm cancels it (requeues it held with
    # --requeue: then a person releases it)
    "sbatch fails": 0.06,  # the successor's sbatch fails (the link's guard heals it at its end)
    "sbatch fails after creating the job": 0.04,  # it timed out but created the job
    "sbatch hangs": 0.02,  # it times out and created nothing
    "step killed": 0.05,  # SIGKILL of the in-job step at a random checkpoint
    "duplicate start": 0.04,  # the same job's prologue runs twice
    "requeue of the running link": 0.03,  # a person or Slurm requeues the link while it works
    "node failure while no successor is queued": 0.3,  # of a link whose successor's sbatch failed
    "ends before its background step": 0.03,  # preempted or its node fails within a second
    "status": 0.15,  # status from another node, at any time
    "cancel": 0.015,  # a person cancels the chain: a deliberate stop
    "resume": 0.05,  # a person runs resume (refused unless the chain ended)
}
LOOKUP_WINDOW = "0.02"  # seconds: the lag faults cost real sleeps
LAGGING_VIEW = 0.1  # per process: it sees the run directory as an earlier step left it
LAG_SECONDS = 60  # how old a lagging view may be, and how long it lasts (NFS's acdirmax)
LAG_STEPS = 3  # how many steps of the history a lagging view may be behind
STATE_FILES = (rc.CHAIN_FILE, rc.WALLTIME_FILE, rc.RETRIES_FILE, rc.JOURNAL_FILE, rc.CANCEL_FILE,
               rc.SUBMIT_FILE, rc.EVENTS_FILE, rc.NOTIFY_FILE)
MAX_EVENTS = 400  # a history longer than this is a chain that does not end


class Violation(AssertionError):
    pass


class InstantTime(object):
    """The module's ``time`` during a history: pauses between Slurm calls take no time."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def sleep(seconds):
        pass


class OwnClock(object):
    """The clock of a background step (own-guard step, guard): its pauses take no time of the
    history's, whose links work meanwhile."""

    def __init__(self):
        self.now = 0.0

    def sleep(self, seconds):
        self.now += seconds

    def __call__(self):
        return self.now


def iso(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def directory_state(run_dir):
    """The run directory's state files as they are: {name: bytes, or None when missing}."""
    state = {}
    for name in STATE_FILES:
        try:
            with open(os.path.join(run_dir, name), "rb") as handle:
                state[name] = handle.read()
        except (OSError, IOError):
            state[name] = None
    return state


class LaggingView(object):
    """One process's lagging view of the run directory: ``stale`` ({name: bytes or None}, as an
    earlier step left the files, or as its job's node last wrote them) until its ``clock`` has
    run ``lasts`` s. A file the process wrote (written here, or changed since it started: its
    killed run wrote it) reads as it is."""

    def __init__(self, run_dir, stale, lasts, clock):
        self.run_dir, self.stale, self.lasts, self.clock = run_dir, stale, lasts, clock
        self.start, self.written = directory_state(run_dir), set()

    def shows(self, directory, name):
        """The stale bytes of ``name`` (None: missing) as a 1-tuple, or () when it reads true."""
        if self.clock() >= self.lasts or name not in self.stale or name in self.written or \
                os.path.abspath(directory) != self.run_dir:
            return ()
        if directory_state(self.run_dir)[name] != self.start[name]:
            return ()
        return (self.stale[name],)


def reading_through(original, view_of):
    """StateStore.read_bytes (``original``) as seen through ``view_of()``, a LaggingView or
    None."""
    def read_bytes(store, name, tail=None, most=None):
        view = view_of()
        shown = view.shows(store.directory, name) if view else ()
        if not shown:
            return original(store, name, tail, most)
        raw = shown[0]
        if raw is None or tail is not None:
            return raw and raw[-tail:]
        return raw[:rc.MAX_STATE_BYTES + 1 if most is None else most + 1]
    return read_bytes


class History(object):
    """One chain's life under random faults; ``run()`` returns the faults injected by kind."""

    def __init__(self, seed, root, lag_steps=LAG_STEPS):
        self.seed, self.rng, self.lag_steps = seed, random.Random(seed), lag_steps
        self.root = root
        self.run_dir = os.path.join(root, "run")
        self.script = os.path.join(root, "job.sh")
        with open(self.script, "w") as handle:
            handle.write("#!/bin/bash\n")
        self.path = os.path.join(root, "cluster.json")
        fake_slurm.save(self.path, {"next_id": 100, "jobs": {}, "name": "local"})
        self.slurm = fake_slurm.InProcess(self.path, clock=lambda: self.now)
        self.now = 1798761600  # 2027-01-01
        self.events, self.injected = [], {}
        self.max_retries = self.rng.choice((0, 1, 2, 3, 5))
        self.max_walltime = self.rng.choice((None, None, 4 * 3600, 9 * 3600))
        self.work_needed = self.rng.randint(1800, 6 * 3600)
        self.progress = 0
        self.working = None  # the job doing the work now
        self.sbatch_failures, self.sbatch_creates_then_fails = 0, False
        self.deliberate = None  # why the chain may legitimately end unfinished
        self.links_started = 0
        # Lagging views are drawn apart, so that a history without one is the one this seed
        # gave before they were drawn.
        self.view_rng = random.Random("lagging views %d" % seed)
        self.states = []  # [the state files as a step left them, history time it was replaced]
        self.wrote = {}  # (job, file name): the index in states of that job's last write of it
        self.view, self.clock = None, OwnClock()  # the running process's view and clock

    # ------------------------------------------------------------------ the fake cluster
    def log(self, text):
        self.capture()
        self.events.append(text)
        if len(self.events) > MAX_EVENTS:
            self.fail(3, "the chain did not end within %d events" % MAX_EVENTS)

    def fail(self, invariant, text):
        raise Violation("invariant %d (%s) violated: %s\nseed %d; history:\n  %s" % (
            invariant, INVARIANTS[invariant], text, self.seed, "\n  ".join(self.events)))

    def jobs(self):
        return fake_slurm.load(self.path)["jobs"]

    def update(self, job_id, **fields):
        cluster = fake_slurm.load(self.path)
        cluster["jobs"][job_id].update(fields)
        fake_slurm.save(self.path, cluster)

    def run_slurm(self, argv, timeout=None, cwd=None, environment=None):
        """The seam: the fake, with the sbatch faults of this moment; a job queued with NAMED_ENV
        in sbatch's environment gets it in its own (sbatch exports it)."""
        if argv[0] == "sbatch" and self.sbatch_failures:
            self.sbatch_failures -= 1
            created = self.sbatch_creates_then_fails and self.slurm(argv, timeout, cwd, environment)
            self.log("  sbatch %s" % ("created job %s, then timed out" % created.stdout.strip()
                                      if created else "failed"))
            result = (fake_slurm.Result(None, "", "sbatch timed out after 60 s")
                      if created or self.sbatch_creates_then_fails is None else
                      fake_slurm.Result(1, "", "sbatch: error: Socket timed out on send/recv "
                                              "operation\n"))
        else:
            result = self.slurm(argv, timeout, cwd, environment)
            if (environment or {}).get(rc.NAMED_ENV) == "1" and result.returncode == 0:
                self.update(result.stdout.strip(), named=True)
        return result

    def capture(self):
        """Keep the run directory's state as this step left it, for lagging views."""
        if not os.path.isdir(self.run_dir):
            return
        state = directory_state(self.run_dir)
        if not self.states or self.states[-1][0] != state:
            if self.states:
                self.states[-1][1] = self.now
            self.states.append([state, None])

    @contextlib.contextmanager
    def process(self, job_id, who):
        """A process of job ``job_id`` runs (``with``): it gets a clock of its own (its pauses
        take none of the history's time) and, if drawn, a lagging view of the run directory, in
        which its job's node sees what it wrote itself."""
        self.capture()
        clock, window = OwnClock(), self.view_rng.randint(1, LAG_SECONDS)
        now = len(self.states) - 1
        earlier = [now - back for back in range(1, min(self.lag_steps, now) + 1)
                   if self.states[now - back][1] >= self.now - window]
        if earlier and self.view_rng.random() < LAGGING_VIEW:
            seen = self.view_rng.choice(earlier)
            lasts = self.view_rng.randint(1, LAG_SECONDS)
            stale = dict((name, self.states[max(seen, self.wrote.get((job_id, name), seen))][0][
                name]) for name in STATE_FILES)
            self.injected["lagging view"] = self.injected.get("lagging view", 0) + 1
            self.log("  %s sees the run directory as it was %d step%s ago (within %d s), for "
                     "%d s of its own clock" % (who, now - seen, "s" if now - seen > 1 else "",
                                                window, lasts))
            self.view = LaggingView(os.path.abspath(self.run_dir), stale, lasts, clock)
        self.clock, before = clock, self.states[-1][0]
        try:
            yield clock
        finally:
            self.view, self.clock = None, OwnClock()
            self.capture()
            self.wrote.update(((job_id, name), len(self.states) - 1) for name in STATE_FILES
                              if self.states[-1][0][name] != before[name])

    def written(self, original, name_of):
        """A StateStore writer that marks what the running process wrote (it sees its own)."""
        def write(store, *args, **kwargs):
            if self.view:
                self.view.written.add(name_of(*args))
            return original(store, *args, **kwargs)
        return write

    def on_own_clock(self, original):
        """A view wait of the module, paused on the running process's clock."""
        def wait(*args, **kwargs):
            kwargs.setdefault("sleep", self.clock.sleep)
            kwargs.setdefault("clock", self.clock)
            return original(*args, **kwargs)
        return wait

    def fault(self, name):
        if self.rng.random() < FAULTS[name]:
            self.injected[name] = self.injected.get(name, 0) + 1
            return True
        return False

    # ------------------------------------------------------------------ Slurm's scheduler
    def eligible(self):
        """Pending jobs Slurm would start now; jobs whose dependency can never be met are
        cancelled first (--kill-on-invalid-dep=yes)."""
        jobs = self.jobs()
        ready = []
        for job_id, job in sorted(jobs.items(), key=lambda item: int(item[0])):
            if job["state"] != "PENDING" or job.get("held"):
                continue
            dependency = job.get("dependency") or ""
            if not dependency:
                ready.append(job_id)
                continue
            kind, _, on = dependency.partition(":")
            predecessor = jobs.get(on)
            state = predecessor["state"].split()[0] if predecessor else "COMPLETED"
            if kind == "afterany":
                if rc.is_final(state):
                    ready.append(job_id)
            elif state == "COMPLETED":
                self.update(job_id, state="CANCELLED", end=iso(self.now),
                            reason="DependencyNeverSatisfied")
                self.log("Slurm cancels %s: its dependency can never be met" % job_id)
                return self.eligible()  # that may release jobs waiting on it
            elif rc.is_final(state):
                ready.append(job_id)
        return ready

    def requeue(self, job_id, state, held=None):
        """Slurm requeues a job: its run is kept for accounting, the same ID waits again."""
        job = self.jobs()[job_id]
        runs = job.get("runs", []) + [{"state": state, "elapsed": job.get("elapsed", 0),
                                       "start": job.get("start", "Unknown"), "end": iso(self.now),
                                       "submit": job.get("submit", iso(self.now))}]
        self.update(job_id, state="PENDING", elapsed=0, start="Unknown", end="Unknown",
                    submit=iso(self.now), runs=runs, held=bool(held), reason=held)

    # ------------------------------------------------------------------ the history
    @contextlib.contextmanager
    def patched(self):
        """The module as this history's processes see it: the fake Slurm with this moment's
        faults, pauses that take no time, the lock drawn, state files read through the running
        process's view."""
        saved = {name: os.environ.get(name) for name in (rc.LOOKUP_SECONDS_ENV, rc.LOCK_ENV)}
        os.environ[rc.LOOKUP_SECONDS_ENV] = LOOKUP_WINDOW
        os.environ[rc.LOCK_ENV] = self.rng.choice(rc.LOCK_KINDS)
        original, rc.run_slurm, rc.time = rc.run_slurm, self.run_slurm, InstantTime()
        store = dict(vars(rc.StateStore))
        waits = dict((name, getattr(rc, name)) for name in ("wait_for_view", "wait_to_be_named")
                     if hasattr(rc, name))  # absent: renamed, not patched
        rc.StateStore.read_bytes = reading_through(store["read_bytes"], lambda: self.view)
        rc.StateStore.write_text = self.written(store["write_text"], lambda name, *_: name)
        rc.StateStore.append_job = self.written(store["append_job"], lambda *_: rc.CHAIN_FILE)
        for name, wait in waits.items():
            setattr(rc, name, self.on_own_clock(wait))
        try:
            yield
        finally:
            rc.run_slurm, rc.time = original, time
            for name in ("read_bytes", "write_text", "append_job"):
                setattr(rc.StateStore, name, store[name])
            for name, wait in waits.items():
                setattr(rc, name, wait)
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def run(self):
        with self.patched():
            self.log("chain: work %d s, max_retries %d, max_walltime %s, lock %s" % (
                self.work_needed, self.max_retries, self.max_walltime, os.environ[rc.LOCK_ENV]))
            submitted = rc.submit_chain(self.run_dir, self.script, [], [],
                                        max_retries=self.max_retries,
                                        max_walltime=self.max_walltime)
            self.script = submitted["script"]  # the resumable copy every link runs
            self.log("submit: job %s" % submitted["job"])
            while True:
                ready = self.eligible()
                if not ready:
                    if not self.person_acts():
                        break
                    continue
                self.rng.shuffle(ready)
                # Jobs Slurm starts at once run their prologues side by side: one may work.
                outcomes = [(job_id, self.start(job_id)) for job_id in ready]
                working = [job_id for job_id, outcome in outcomes
                           if outcome and outcome.status == rc.EXIT_WORK]
                if len(working) > 1:
                    self.fail(1, "jobs %s all decided to work" % " ".join(working))
                for job_id, outcome in outcomes:
                    if outcome and outcome.status == rc.EXIT_WORK:
                        self.work(job_id, outcome)
                    elif outcome:
                        self.end(job_id, "COMPLETED" if outcome.status == rc.EXIT_DONE
                                 else "FAILED", 2, exit_code="0:0"
                                 if outcome.status == rc.EXIT_DONE else "1:0")
                self.between_links()
            self.check_end()
        return self.injected

    def person_acts(self):
        """Nothing can start: a person follows status's advice for a held job; else the end."""
        held = [job_id for job_id, job in self.jobs().items()
                if job["state"] == "PENDING" and job.get("held")]
        if not held and self.deliberate == "cancelled by a person" and self.rng.random() < 0.5:
            return self.resume()
        if not held:
            return False
        status = rc.chain_status(self.run_dir)
        if not status["attention"]:
            self.fail(3, "job %s is held and nothing continues the chain, but status --check "
                         "sees nothing wrong: %s" % (held[0], status["verdict"]))
        self.slurm(["scontrol", "release", held[0]])
        self.update(held[0], reason=None)
        self.log("a person releases held job %s (status: %s)" % (held[0], status["verdict"]))
        return True

    def start(self, job_id):
        job = self.jobs()[job_id]
        if job.get("wrap"):
            return self.guard(job_id, job)
        requeue = job.get("requeue", "1") == "1"
        if len(job.get("runs", [])) < 4 and (
                FAULTS["death before prologue"] + FAULTS["launch failure"]) > 0:
            if self.fault("death before prologue"):
                self.launch(job_id)
                state = self.rng.choice(("NODE_FAIL", "BOOT_FAIL"))
                self.log("job %s dies while Slurm launches it (%s): %s" % (
                    job_id, state, "requeued" if requeue else "it ends"))
                return self.requeue(job_id, state) if requeue else self.end(job_id, state, 0)
            if self.fault("launch failure"):
                self.launch(job_id)
                self.log("job %s: node Prolog fails: %s" % (
                    job_id, "requeued held" if requeue else "slurmd cancels it"))
                if not requeue:
                    return self.end(job_id, "CANCELLED by 0", 0)
                return self.requeue(job_id, "NODE_FAIL", held="launch failed requeued held")
        self.update(job_id, state="RUNNING", start=iso(self.now), elapsed=0)
        self.links_started += 1
        outcome = self.prologue(job_id)
        cluster = fake_slurm.load(self.path)
        if cluster.pop("sacct_down", None):
            fake_slurm.save(self.path, cluster)
            self.log("accounting is back")
        if self.fault("duplicate start"):
            again = self.prologue(job_id, note="the same job's prologue again")
            if again.status != outcome.status or outcome.record.successor not in (
                    None, again.record.successor):  # the second may heal a failed sbatch
                self.fail(2, "job %s's second prologue decided %s (successor %s), the first %s "
                             "(successor %s)" % (job_id, again.status, again.record.successor,
                                                  outcome.status, outcome.record.successor))
        return outcome

    def guard(self, job_id, job):
        """A guard runs (its job ended): the guard's step, on a clock of its own."""
        self.update(job_id, state="RUNNING", start=iso(self.now))
        guarded = job["dependency"].split(":")[1]
        after = [word.partition("=")[2] for word in shlex.split(job["wrap"])
                 if word.startswith("--after=")]  # as guard_command reads its words
        with self.process(job_id, "guard %s" % job_id) as clock:
            event, _, words = rc.guard_chain(self.run_dir, guarded, {"SLURM_JOB_ID": job_id},
                                             sleep=clock.sleep, clock=clock,
                                             after=(after or [None])[-1])
        self.update(job_id, state="COMPLETED", end=iso(self.now), elapsed=1)
        self.log("guard %s of job %s: %s" % (job_id, guarded, words))
        if event and event.event == "broken":
            self.deliberate = "the guard gave up"
        elif event:
            self.deliberate = None
        return None

    def launch(self, job_id):
        """Slurm allocated a node (the job's Start) and spent a few seconds launching on it."""
        self.update(job_id, start=iso(self.now))
        self.now += 5

    def prologue(self, job_id, note=None):
        job = self.jobs()[job_id]
        environ = {"SLURM_JOB_ID": job_id, "SLURM_JOB_NAME": "job.sh",
                   "SLURM_CLUSTER_NAME": "local",
                   "SLURM_RESTART_COUNT": str(len(job.get("runs", [])))}
        if job.get("dependency"):
            environ["SLURM_JOB_DEPENDENCY"] = job["dependency"]
        if job.get("named"):
            environ[rc.NAMED_ENV] = "1"
        spec = rc.NextLink(self.script, [], [], "job.sh", self.root)
        settings = rc.Settings(self.max_retries, self.max_walltime)
        before = self.snapshot()
        with self.process(job_id, "job %s's prologue" % job_id):
            if self.fault("step killed"):
                point = self.rng.randint(1, 14)
                self.log("job %s: in-job step SIGKILLed at checkpoint %d; the prologue runs it "
                         "again" % (job_id, point))
                self.killed_step(environ, spec, settings, point)
            try:
                outcome = rc.run_link(self.run_dir, settings, spec, environ, now=lambda: self.now)
            except rc.StateError as error:
                self.fail(2, "job %s's prologue refused: %s" % (job_id, error))
        record = outcome.record
        self.log("job %s prologue%s: %s, predecessor %s %s, successor %s, walltime %s, "
                 "retries %s" % (job_id, " (%s)" % note if note else "", record.action,
                                 record.predecessor, record.predecessor_state, record.successor,
                                 record.walltime, record.retries))
        self.check_counts(before, record)
        return outcome

    def killed_step(self, environ, spec, settings, point):
        pid = os.fork()
        if pid == 0:  # the step, killed at a checkpoint (or finishing first)
            status = 99
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 2)
                os.environ[rc.CRASH_ENV] = str(point)
                rc._checkpoints_passed[0] = 0
                status = rc.run_link(self.run_dir, settings, spec, environ,
                                     now=lambda: self.now).status
            except BaseException:
                status = 98
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        if not os.WIFSIGNALED(status) and os.WEXITSTATUS(status) > 3:
            self.fail(2, "the killed step failed otherwise: exit %d" % os.WEXITSTATUS(status))

    def work(self, job_id, outcome):
        if self.working and self.working != job_id:
            self.fail(1, "job %s works while job %s still works" % (job_id, self.working))
        self.working = job_id
        limit = int(self.jobs()[job_id].get("time_limit") or 60) * 60
        if self.fault("ends before its background step"):
            end = self.rng.choice(("NODE_FAIL", "PREEMPTED"))
            self.log("job %s: %s within a second of its work, before its background step ran"
                     % (job_id, end))
            if end == "NODE_FAIL":
                return self.node_failure(job_id, 1)
            return self.end(job_id, end, 1, work=True)
        self.background(job_id, outcome)
        if outcome.record.successor is None and self.fault(
                "node failure while no successor is queued"):
            return self.node_failure(job_id, self.rng.randint(1, 9))
        if self.fault("status"):
            self.status("while job %s works" % job_id)
        if self.fault("cancel"):
            return self.cancel()
        if self.fault("resume"):
            self.resume()
        if self.jobs()[job_id]["state"] != "RUNNING":
            self.working = None
            return  # cancelled meanwhile
        self.finish_work(job_id, limit)

    def node_failure(self, job_id, elapsed):
        """The link's node fails: Slurm requeues a job whose Requeue flag is on (the same ID
        runs again), else it ends NODE_FAIL."""
        if self.jobs()[job_id].get("requeue") != "1":
            return self.end(job_id, "NODE_FAIL", elapsed, work=True)
        self.progress += elapsed
        self.now += elapsed
        self.update(job_id, elapsed=elapsed)
        self.log("job %s: its node fails after %d s; Slurm requeues it (Requeue=1)" % (
            job_id, elapsed))
        self.working = None
        return self.requeue(job_id, "NODE_FAIL")

    def finish_work(self, job_id, limit):
        """The link's work ends: done, or its time limit or a fault ends it first."""
        left = self.work_needed - self.progress
        if left <= limit:
            self.exit_trap(job_id, left)
            return self.end(job_id, "COMPLETED", left, work=True)
        names, weights = zip(*ENDS)
        end = self.rng.choices(names, weights)[0]
        elapsed = limit if end == "TIMEOUT" else self.rng.randint(1, limit)
        if end == "exit 75":  # a work that saved progress: sooner is a loop, a counted retry
            elapsed = max(elapsed, min(rc.NO_PROGRESS_SECONDS, limit))
        if self.fault("requeue of the running link"):  # Requeue=1 first: links turn it off
            self.progress += elapsed
            self.now += elapsed
            self.update(job_id, elapsed=elapsed, requeue="1")  # scontrol requeue needs it
            self.log("a person requeues job %s after %d s of work" % (job_id, elapsed))
            self.working = None
            return self.requeue(job_id, "REQUEUED")
        if end == "NODE_FAIL":
            return self.node_failure(job_id, elapsed)
        if end.startswith("exit"):
            code = int(end.split()[1])  # 76: the chain stops if the next link sees it (cause work)
            return self.end(job_id, "FAILED", elapsed, exit_code="%d:0" % code, work=True)
        return self.end(job_id, end, elapsed, work=True)

    def background(self, job_id, outcome):
        """The first part of the background step a working link starts as its work starts."""
        again = outcome.observation is not None and outcome.observation.source == "journal"
        with self.process(job_id, "the background step of job %s" % job_id):
            record, _ = rc.finish_queueing(self.run_dir, {"SLURM_JOB_ID": job_id}, again=again)
        self.log("  background step of job %s: %s" % (job_id, "guard %s of successor %s" % (
            record.guard, record.successor) if record and record.successor else "nothing"))
        if record is not None and not (record.successor or record.guarded_by):
            with self.process(job_id, "the own-guard step of job %s" % job_id) as clock:
                guard = rc.guard_until_queued(self.run_dir, {"SLURM_JOB_ID": job_id},
                                              clock.sleep)
            self.log("  job %s's own guard: %s after %d s" % (job_id, guard, clock.now))

    def exit_trap(self, job_id, elapsed):
        """The work exits 0 while its job still runs: the script's exit trap says so."""
        self.update(job_id, elapsed=elapsed)
        with self.process(job_id, "the exit trap of job %s" % job_id):
            event, _, _ = rc.work_finished(self.run_dir, {"SLURM_JOB_ID": job_id},
                                           now=lambda: self.now + elapsed)
        self.log("  exit trap of job %s: %s" % (job_id, event.event if event else "nothing"))

    def end(self, job_id, state, elapsed, exit_code="0:0", work=False):
        if work:
            self.progress += elapsed
            self.working = None
        self.now += elapsed
        cluster = fake_slurm.load(self.path)
        job = cluster["jobs"][job_id]
        job.update(state=state, elapsed=elapsed, end=iso(self.now), exit_code=exit_code)
        if self.fault("lag"):
            job["in_controller"], job["sacct_hidden_calls"] = False, 1
        elif self.fault("lag beyond the window"):
            job["in_controller"], job["sacct_hidden_calls"] = False, 1000
        elif self.fault("forgotten"):
            job["in_controller"] = False
        elif self.fault("accounting outage"):
            job["in_controller"], cluster["sacct_down"] = False, True
        fake_slurm.save(self.path, cluster)
        self.log("job %s ends %s after %d s%s (progress %d/%d)%s" % (
            job_id, state, elapsed, " exit %s" % exit_code if state == "FAILED" else "",
            self.progress, self.work_needed, "" if job.get("in_controller", True) else
            "; the controller forgets it%s" % (
                ", accounting is down" if cluster.get("sacct_down") else
                ", accounting shows it late (%d calls)" % job["sacct_hidden_calls"]
                if job.get("sacct_hidden_calls") else "")))

    def between_links(self):
        guards = [job_id for job_id, job in self.jobs().items()
                  if job.get("wrap") and job["state"] == "PENDING"]
        if len(guards) > 1:
            self.fail(5, "guards %s pending at once: more than one extra pending job"
                      % " ".join(guards))
        if self.fault("sbatch fails"):
            self.sbatch_failures, self.sbatch_creates_then_fails = self.rng.randint(1, 2), False
        elif self.fault("sbatch fails after creating the job"):
            self.sbatch_failures, self.sbatch_creates_then_fails = 1, True
        elif self.fault("sbatch hangs"):
            self.sbatch_failures, self.sbatch_creates_then_fails = 1, None
        else:
            self.sbatch_failures = 0
        if self.fault("status"):
            self.status("between links")

    # ------------------------------------------------------------------ people on other nodes
    def status(self, when):
        try:
            status = rc.chain_status(self.run_dir)
        except rc.StateError as error:
            self.fail(2, "status %s refused: %s" % (when, error))
        self.log("status %s: %s" % (when, status["verdict"]))

    def cancel(self):
        result = rc.cancel_chain(self.run_dir)
        self.deliberate = "cancelled by a person"
        self.working = None
        self.log("a person cancels the chain: %s" % " ".join(result["cancelled"]))

    def resume(self):
        try:
            result = rc.resume_chain(self.run_dir, now=lambda: self.now)
        except rc.StateError as error:
            self.log("resume refused: %s" % error)
            return False
        self.deliberate = None
        self.log("resume queued job %s (counted %d s)" % (result["job"], result["counted"]))
        return True

    # ------------------------------------------------------------------ invariants
    def snapshot(self):
        try:
            return rc.StateStore(self.run_dir).snapshot() if os.path.isdir(self.run_dir) else None
        except rc.StateError as error:
            self.fail(2, "a state file does not parse: %s" % error)

    def truth(self, job_id):
        """(final state, elapsed of every run, ExitCode) as the job really ended."""
        job = self.jobs().get(job_id) or {}
        return (job.get("state"), job.get("elapsed", 0) + sum(
            run.get("elapsed", 0) for run in job.get("runs", [])), job.get("exit_code"))

    def check_counts(self, before, record):
        """Walltime grows by what the predecessor really ran, once; retries and the action are
        what the decision table says for its real end; a rerun changes no counter."""
        after = self.snapshot()
        if record.predecessor is None:
            return
        counters = (before.walltime or 0, before.retries or 0) if before else (0, 0)
        if before and before.record and before.record.job == record.job:  # a rerun
            if (after.walltime or 0, after.retries or 0) != counters:
                self.fail(2, "job %s ran its prologue again and changed the counters %s -> %s" % (
                    record.job, counters, (after.walltime, after.retries)))
            return
        state, elapsed, exit_code = self.truth(record.predecessor)
        if record.predecessor_state == rc.NOT_VISIBLE:
            state, elapsed = rc.NOT_VISIBLE, 0  # the table: resume, count nothing
        walltime = counters[0] + elapsed
        expected = rc.decide(state, retries=counters[1], walltime=walltime,
                             max_retries=self.max_retries, max_walltime=self.max_walltime,
                             exit_code=exit_code, elapsed=elapsed)
        expected = rc.stop_at_cap(expected, walltime, self.max_walltime)
        if record.cause == "cancel":
            expected = expected._replace(action="stop")
        if (after.walltime, after.retries, record.action) != (walltime, expected.retries,
                                                             expected.action):
            self.fail(2, "job %s: predecessor %s ran %d s and ended %s %s; walltime %s -> %s, "
                         "retries %s -> %s, action %s; the table says walltime %s, retries %s, "
                         "action %s" % (record.job, record.predecessor, elapsed, state,
                                        exit_code, counters[0], after.walltime, counters[1],
                                        after.retries, record.action, walltime,
                                        expected.retries, expected.action))

    def check_end(self):
        jobs = self.jobs()
        live = [job_id for job_id, job in jobs.items()
                if job["state"].split()[0] in ("PENDING", "RUNNING")]
        if live:
            self.fail(4, "the chain ended but jobs %s are %s" % (
                " ".join(live), " ".join(jobs[job_id]["state"] for job_id in live)))
        for job_id, job in jobs.items():  # links, and guards that never hold the links' resources
            if job.get("wrap") and "--cpus-per-task=1" in job["options"] and \
                    "--mem=" + rc.GUARD_MEMORY in job["options"]:
                continue
            if job["script"] != self.script and not job["script"].startswith(
                    os.path.join(self.run_dir, rc.STAGED_SCRIPT)):
                self.fail(5, "job %s is not a link of the chain: %s %s" % (
                    job_id, job.get("options"), job.get("script")))
        record = rc.StateStore(self.run_dir).read_record()
        finished = self.progress >= self.work_needed
        why = (record and record.cause in ("max_retries", "max_walltime", "work", "cancel") and
               record.cause) or self.deliberate
        if not finished and not why:
            self.fail(3, "the work is unfinished (%d of %d s) and nothing stopped the chain on "
                         "purpose; last decision: %s" % (self.progress, self.work_needed,
                                                         record and record.reason))
        bound = 4 * self.work_needed // 3600 + 4 + 2 * sum(self.injected.values())
        if self.links_started > bound:
            self.fail(3, "%d links started, more than the bound %d" % (self.links_started, bound))
        cluster = fake_slurm.load(self.path)  # accounting is back and catches up in the end
        cluster.pop("sacct_down", None)
        for job in cluster["jobs"].values():
            job.pop("sacct_hidden_calls", None)
        fake_slurm.save(self.path, cluster)
        status = rc.chain_status(self.run_dir)
        self.log("end: %s; verdict: %s" % ("work finished" if finished else why,
                                           status["verdict"]))
        expected = "finished" if finished else {"max_retries": "failed",
                                                "the guard gave up": "broken"}.get(why, "stopped")
        # The work may be done in a link whose node failed before it exited (nothing told the
        # chain): a person's cancel then stops it, and status rightly says stopped; or the guard
        # of the successor that replaced it cannot tell how that ended, and says broken.
        unknowing = {"cancelled by a person": "stopped", "the guard gave up": "broken"}
        accepted = {expected, unknowing.get(self.deliberate, expected) if finished else expected}
        if status["verdict_word"] not in accepted or status["jobs"] and status["attention"] \
                and status["verdict_word"] not in ("failed", "broken"):
            self.fail(3, "the chain ended (%s) but status says %s (attention: %s)" % (
                "work finished" if finished else why, status["verdict"], status["attention"]))


def run_histories(count, seed, root=None, verbose=False, violations=None, lag_steps=LAG_STEPS):
    """Run ``count`` histories from seed, seed+1, ...; return (histories, faults by kind).
    ``violations``: a list that collects (seed, events, Violation) instead of stopping;
    ``lag_steps``: how far behind a lagging view may be (0: none drawn)."""
    faults = {}
    base = tempfile.mkdtemp(prefix="rc-histories-", dir=root)
    # The run directory is a shared filesystem's (its views may lag), wherever the temp dir is.
    saved = os.environ.get(rc.VIEW_WAIT_ENV)
    os.environ[rc.VIEW_WAIT_ENV] = str(rc.VIEW_WAIT_SECONDS)
    try:
        for number in range(count):
            directory = os.path.join(base, str(number % 8))
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            history = History(seed + number, directory, lag_steps)
            try:
                history.run()
            except Violation as violation:
                if violations is None:
                    raise
                violations.append((history.seed, len(history.events), violation))
            for name, times in history.injected.items():
                faults[name] = faults.get(name, 0) + times
            if verbose:
                print("\n".join(history.events))
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if saved is None:
            del os.environ[rc.VIEW_WAIT_ENV]
        else:
            os.environ[rc.VIEW_WAIT_ENV] = saved
    return count, faults


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="print every history")
    parser.add_argument("--lag-steps", type=int, default=LAG_STEPS,
                        help="how many steps a lagging view may be behind (0: none drawn)")
    parser.add_argument("--keep-going", action="store_true",
                        help="count violations (a line each, the shortest in full) and go on")
    options = parser.parse_args(argv)
    started = time.time()
    share, children = -(-options.histories // options.workers), []
    for worker in range(options.workers):
        first = options.seed + worker * share
        count = min(share, options.seed + options.histories - first)
        pid = os.fork() if options.workers > 1 else 0
        if pid == 0:
            found = [] if options.keep_going else None
            try:
                done, faults = run_histories(count, first, "/dev/shm" if os.path.isdir(
                    "/dev/shm") else None, options.verbose, found, options.lag_steps)
                for seed, _, violation in found or ():
                    print("seed %d: %s" % (seed, str(violation).split("\n")[0]))
                if found:
                    print("the shortest:\n%s" % min(found, key=lambda item: item[1])[2])
                print("seeds %d-%d: %d histories, %d faults injected (%s), %d violations" % (
                    first, first + count - 1, done, sum(faults.values()), ", ".join(
                        "%s %d" % item for item in sorted(faults.items())), len(found or ())))
                status = 1 if found else 0
            except Violation as violation:
                print(violation)
                status = 1
            if options.workers > 1:
                sys.stdout.flush()
                os._exit(status)
            return status
        children.append(pid)
    failed = 0
    for pid in children:
        failed |= os.WEXITSTATUS(os.waitpid(pid, 0)[1]) != 0
    print("%d histories in %.0f s, %s" % (options.histories, time.time() - started,
                                          "violations found" if failed else "0 violations"))
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main())
