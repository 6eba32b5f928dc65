"""Adversarial reliability suite: crash injection, corrupt and hostile state, outages, races and
fuzzing. Each part prints how many cases it ran (see docs/reliability.md)."""
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
import fake_slurm
import histories
from fake_cluster import BASH, FakeCluster, read, run_cli, start_chain

SEED = 20261130
RANDOM_KILLS = 1200  # random SIGKILL instants per crash-injection variant
TRUE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conftest.py")  # any file
FAST_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

# --------------------------------------------------------------------------- crash injection


def in_process_slurm(root, states):
    """The fake Slurm in-process, its cluster under root: predecessors {job ID: (state,
    elapsed)} as accounting shows them (the controller forgot them), and a job killed right after
    sbatch queued its successor at one of the crash-injection checkpoints."""
    path = os.path.join(root, "cluster.json")
    fake_slurm.save(path, {"next_id": 5000, "jobs": {
        job_id: {"state": state, "elapsed": elapsed, "start": "2026-11-30T00:00:00",
                 "end": "2026-11-30T01:00:00", "in_controller": False}
        for job_id, (state, elapsed) in states.items()}})
    return fake_slurm.InProcess(path, after_submit=rc._checkpoint)


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
            spec = rc.NextLink(TRUE_SCRIPT, [], [], "crash")
            try:
                status = rc.run_link(run_dir, rc.Settings(3, None), spec, environ).status
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
    store.write_text(rc.WALLTIME_FILE, "1000\n")
    store.write_text(rc.RETRIES_FILE, "1\n")
    store.write_record(rc.Record(job="100", action="start", reason="", walltime=1000, retries=1,
                                 successor="200", phase="queued", max_retries=3, link=1))


def check_after_recovery(run_dir, slurm, next_link):
    """The invariants after a killed run of job 200 and the recovery run that followed."""
    store = rc.StateStore(run_dir)
    assert store.chain_jobs()[:2] == ["100", "200"]
    walltime, retries = store.read_counter(rc.WALLTIME_FILE), store.read_counter(rc.RETRIES_FILE)
    if next_link == "rerun":
        assert (walltime, retries) == (1050, 2)
    else:
        assert (walltime, retries) == (1060, 2)
        assert store.chain_jobs() == ["100", "200"] + slurm.successors_of("200")
    ran = ["200"] + (slurm.successors_of("200") if next_link == "successor" else [])
    for job in ran:  # every link that ran queued exactly one successor
        assert len(slurm.successors_of(job)) == 1, slurm.jobs()


@pytest.mark.parametrize("next_link", ["rerun", "successor"])
def test_crash_injection(tmp_path_factory, next_link, capsys):
    rng = random.Random(SEED)
    base = tmp_path_factory.mktemp("crash", numbered=True)
    root = FAST_DIR and os.path.join(FAST_DIR, "rc-crash-%d-%s" % (os.getpid(), next_link)) or str(base)
    os.makedirs(root, exist_ok=True)
    states = {"100": ("FAILED", 50), "200": ("TIMEOUT", 10)}  # 200 is the job killed
    # Count the checkpoints of one clean run, then kill at each of them and at random instants.
    probe = os.path.join(root, "probe")
    seed_chain(probe)
    assert run_in_child(probe, "200", "100", in_process_slurm(probe, states)) == 0
    checkpoints = rc_checkpoints_of(probe, states)
    trials = [("checkpoint", point) for point in range(1, checkpoints + 1)]
    trials += [("instant", rng.uniform(0, 0.004)) for _ in range(RANDOM_KILLS)]
    killed = completed = 0
    for number, (kind, point) in enumerate(trials):
        run_dir = os.path.join(root, "t%d" % number)
        seed_chain(run_dir)
        slurm = in_process_slurm(run_dir, states)
        status = run_in_child(run_dir, "200", "100", slurm,
                              kill_at=point if kind == "checkpoint" else None,
                              kill_after=point if kind == "instant" else None)
        killed += status == -signal.SIGKILL
        completed += status == 0
        assert status in (0, -signal.SIGKILL), (kind, point, status)
        if next_link == "rerun" or not slurm.successors_of("200"):
            # the same job ID again (Slurm requeue), also when it died before queueing
            assert run_in_child(run_dir, "200", "100", slurm, restart=1) == 0, (kind, point)
        if next_link == "successor":
            [successor] = slurm.successors_of("200")
            assert run_in_child(run_dir, successor, "200", slurm) == 0, (kind, point)
        check_after_recovery(run_dir, slurm, next_link)
        subprocess.call(["rm", "-rf", run_dir])
    subprocess.call(["rm", "-rf", root])
    with capsys.disabled():
        print("\ncrash injection (%s): %d checkpoints + %d random instants = %d kills tried, "
              "%d killed mid-step, %d finished first" % (
                  next_link, checkpoints, RANDOM_KILLS, len(trials), killed, completed))
    assert killed >= checkpoints


def rc_checkpoints_of(run_dir, states):
    """How many checkpoints one clean in-job step passes (killing past the last one is a no-op)."""
    for point in range(1, 200):
        fresh = run_dir + "-count%d" % point
        seed_chain(fresh)
        if run_in_child(fresh, "200", "100", in_process_slurm(fresh, states), kill_at=point) == 0:
            return point - 1
    raise AssertionError("no end of checkpoints")


# What a crash of the node (not only of the job) can undo: each file's data is synced before its
# rename; the journal's decision and its directory before any other file; the files it changes,
# then one directory fsync, before the successor's sbatch; the journal that names the successor,
# not its directory: losing it is the kill after sbatch above (docs/state-files.md).
SYNCS = [
    # situation: predecessor (state, elapsed), fsyncs and the sbatch in order
    ("timeout adds walltime", ("TIMEOUT", 50),
     ["journal", "dir", "walltime", "chain", "dir", "sbatch", "journal"]),
    ("failure counts a retry", ("FAILED", 0),
     ["journal", "dir", "retries", "chain", "dir", "sbatch", "journal"]),
    ("preemption changes no counter", ("PREEMPTED", 0),
     ["journal", "dir", "chain", "sbatch", "journal"]),
]


@pytest.mark.parametrize("situation,predecessor,expected", SYNCS, ids=[row[0] for row in SYNCS])
def test_a_link_syncs_what_its_successor_needs_before_queueing_it(tmp_path, monkeypatch,
                                                                   situation, predecessor,
                                                                   expected):
    run_dir = str(tmp_path / "run")
    seed_chain(run_dir)  # its last link queued this one (200) and the guard that watches it
    store = rc.StateStore(run_dir)
    store.write_record(store.read_record()._replace(guard="150"))
    synced, names = [], {rc.JOURNAL_FILE: "journal", rc.WALLTIME_FILE: "walltime",
                         rc.RETRIES_FILE: "retries", rc.CHAIN_FILE: "chain"}
    fsync = os.fsync

    def noted(descriptor):
        path = os.readlink("/proc/self/fd/%d" % descriptor)
        synced.append("dir" if path == run_dir else names[os.path.basename(path).split(".tmp.")[0]])
        fsync(descriptor)
    monkeypatch.setattr(os, "fsync", noted)
    slurm = in_process_slurm(str(tmp_path), {"100": predecessor})
    slurm.after_submit = lambda: synced.append("sbatch")
    monkeypatch.setattr(rc, "run_slurm", slurm)
    outcome = rc.run_link(run_dir, rc.Settings(3, None), rc.NextLink(TRUE_SCRIPT, [], [], "x"),
                          {"SLURM_JOB_ID": "200", "SLURM_JOB_DEPENDENCY": "afternotok:100"})
    assert outcome.status == rc.EXIT_WORK and outcome.record.successor
    assert synced == expected


# --------------------------------------------------------------------------- corrupt and hostile state

KINDS = {
    "empty": b"", "garbage": b"lots of it\n", "negative": b"-5\n", "huge": b"1" + b"0" * 30 + b"\n",
    "non-utf8": b"\xff\xfe\x00", "directory": None, "symlink": "symlink", "fifo": "fifo",
}
STATE_FILES = [rc.CHAIN_FILE, rc.WALLTIME_FILE, rc.RETRIES_FILE, rc.JOURNAL_FILE]
HOSTILE_CASES = [(name, kind) for name in STATE_FILES for kind in KINDS
                 if not (name == rc.JOURNAL_FILE and kind == "negative")]


def plant(path, kind, elsewhere):
    if os.path.lexists(path):
        os.unlink(path)
    if kind == "directory":
        os.mkdir(path)
    elif kind == "symlink":
        with open(elsewhere, "w") as handle:
            handle.write("7\n")
        os.symlink(elsewhere, path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as handle:
            handle.write(KINDS[kind])


def snapshot(run_dir):
    found = {}
    for path in glob.glob(os.path.join(run_dir, ".*")):
        mode = os.lstat(path).st_mode
        found[path] = (open(path, "rb").read() if stat.S_ISREG(mode) else stat.S_IFMT(mode))
    return found


@pytest.mark.parametrize("name,kind", HOSTILE_CASES, ids=["%s-%s" % case for case in HOSTILE_CASES])
def test_hostile_state_file_stops_the_link_and_changes_nothing(cluster, run_dir, tmp_path, name, kind):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 73)
    path = os.path.join(run_dir, name)
    plant(path, kind, str(tmp_path / "elsewhere"))
    before = snapshot(run_dir)
    result = cluster.run_link(script, successor, predecessor=100, timeout=30)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and "Traceback" not in result.stderr
    assert cluster.work_done() == ["100"] and len(cluster.calls("sbatch")) == 1
    assert snapshot(run_dir) == before
    if kind == "symlink":
        assert open(str(tmp_path / "elsewhere")).read() == "7\n"


SYSTEM_PYTHON = "/usr/bin/python3"  # an interpreter user nobody may run (pyenv's live under /root)


def as_nobody(argv, env, cwd):
    """Run argv as user nobody: as root, permissions only bind through another user."""
    return subprocess.run(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
                          + argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60)


def nobody_problem():
    if os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"):
        return "needs root and setpriv to act as another user"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return "no %s for user nobody" % SYSTEM_PYTHON
    check = as_nobody(["test", "-r", rc.__file__], None, "/")
    return None if check.returncode == 0 else "user nobody cannot read %s" % rc.__file__


@pytest.fixture
def open_cluster():
    """A fake cluster in a directory every user may use, run by an interpreter all may run."""
    problem = nobody_problem()
    if problem:
        pytest.skip(problem)
    root = "/tmp/rc-nobody-%d-%d" % (os.getpid(), int(time.time() * 1000) % 100000)
    os.makedirs(root)
    os.chmod(root, 0o1777)  # as /tmp: everyone may create, no one may rename another's
    cluster = FakeCluster(root, python=SYSTEM_PYTHON, tool_python=SYSTEM_PYTHON)
    for path in (cluster.state_path, cluster.state_path + ".calls"):
        open(path, "a").close()
        os.chmod(path, 0o666)
    yield cluster
    subprocess.call(["rm", "-rf", root])


@pytest.mark.parametrize("situation", ["unreadable state file", "read-only run directory",
                                       "run directory not writable for a first job"])
def test_a_chain_run_as_another_user_is_refused_in_one_line_and_nothing_changes(open_cluster,
                                                                               situation):
    cluster = open_cluster
    run_dir = os.path.join(cluster.root, "run")
    script, successor = start_chain(cluster, run_dir)
    os.chmod(script, 0o755)
    cluster.finish(100, "TIMEOUT", 73)
    if situation == "unreadable state file":
        os.chmod(run_dir, 0o777)
        os.chmod(os.path.join(run_dir, rc.RETRIES_FILE), 0o000)
    before = snapshot(run_dir)
    cluster.set_job(successor, state="RUNNING")
    environ = cluster.env(successor, "afternotok:100")
    if situation.endswith("first job"):
        environ = cluster.env(4000)
        cluster.finish(successor, "COMPLETED", 1)  # the old chain is over
    result = as_nobody([BASH, script], environ, cluster.root)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and run_dir in lines[0] and "belongs to root (uid 0" in lines[0], lines
    assert cluster.work_done() == ["100"] and len(cluster.calls("sbatch")) == 1
    assert snapshot(run_dir) == before


def test_missing_run_dir_is_created_for_a_first_job(cluster, tmp_path):
    run_dir = str(tmp_path / "deep" / "new dir")
    script = cluster.write_script(run_dir)
    assert cluster.run_link(script, 100).returncode == 0
    assert read(run_dir, rc.CHAIN_FILE) == "100\n"


# --------------------------------------------------------------------------- outages


def test_sacct_missing_from_path(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "FAILED", 5)
    os.unlink(os.path.join(cluster.bin, "sacct"))
    result = cluster.run_link(script, successor, predecessor=100, RESUMABLE_CHAIN_LOOKUP_SECONDS=1)
    assert result.returncode == 0, result.stderr
    assert "from scontrol" in result.stderr  # no accounting needed while the controller knows
    assert read(run_dir, rc.RETRIES_FILE) == "1\n"
    cluster.finish(successor, "FAILED", 5)
    cluster.set_job(successor, in_controller=False)  # now accounting is needed, and missing
    result = cluster.run_link(script, cluster.pending()[-1], predecessor=successor,
                              RESUMABLE_CHAIN_LOOKUP_SECONDS=1)
    assert result.returncode == 0, result.stderr
    assert "sacct failed: sacct:" in result.stderr and "NOT_VISIBLE" in result.stderr
    assert read(run_dir, rc.RETRIES_FILE) == "1\n"


def test_sacct_and_scontrol_both_failing_resume_without_a_retry(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "FAILED", 5)
    cluster.update(sacct_down=True, scontrol_down=True)
    result = cluster.run_link(script, successor, predecessor=100, RESUMABLE_CHAIN_LOOKUP_SECONDS=1)
    assert result.returncode == 0, result.stderr
    assert "NOT_VISIBLE" in result.stderr and read(run_dir, rc.RETRIES_FILE) == "0\n"
    assert cluster.work_done() == ["100", successor]


@pytest.mark.parametrize("command", ["sacct", "scontrol"])
def test_hanging_query_gives_up_at_the_window(cluster, run_dir, command):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 5)
    cluster.update(hang={command: 120})
    if command == "scontrol":
        cluster.set_job(100, sacct_hidden_calls=10 ** 6)
    else:
        cluster.set_job(100, in_controller=False)
    started = time.time()
    result = cluster.run_link(script, successor, predecessor=100, RESUMABLE_CHAIN_LOOKUP_SECONDS=2,
                              RESUMABLE_CHAIN_COMMAND_TIMEOUT=3)
    elapsed = time.time() - started
    assert result.returncode == 0, result.stderr
    assert cluster.work_done() == ["100", successor]
    assert elapsed < 60, elapsed  # bounded by the window and the command timeout, not the hang
    assert "timed out" in result.stderr


def test_hanging_sbatch_warns_and_work_continues(cluster, run_dir):
    cluster.update(hang={"sbatch": 120})
    script = cluster.write_script(run_dir)
    started = time.time()
    result = cluster.run_link(script, 100, RESUMABLE_CHAIN_COMMAND_TIMEOUT=2)
    assert result.returncode == 0 and time.time() - started < 30
    assert "sbatch timed out after 6 s" in result.stderr  # 3 times a query's timeout
    assert "Chain will NOT continue on failure until one is queued" in result.stderr
    assert cluster.work_done() == ["100"]


def test_full_disk_keeps_the_old_state(tmp_path, monkeypatch):
    run_dir = str(tmp_path / "run")
    seed_chain(run_dir)
    before = snapshot(run_dir)
    real_write = os.write

    def full_disk(descriptor, payload):
        if os.path.basename(os.readlink("/proc/self/fd/%d" % descriptor)).startswith("."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(descriptor, payload)

    monkeypatch.setattr(os, "write", full_disk)
    monkeypatch.setattr(rc, "run_slurm", in_process_slurm(str(tmp_path), {"100": ("FAILED", 50)}))
    spec = rc.NextLink(TRUE_SCRIPT, [], [], "disk")
    with pytest.raises(rc.StateError) as error:
        rc.run_link(run_dir, rc.Settings(3, None), spec, {"SLURM_JOB_ID": "200",
                                                          "SLURM_JOB_DEPENDENCY": "afternotok:100"})
    monkeypatch.undo()
    assert "No space left on device" in str(error.value) and "old content kept" in str(error.value)
    after = snapshot(run_dir)
    after.pop(os.path.join(run_dir, rc.LOCK_FILE))  # the empty lock file holds no state
    assert after == before
    assert not glob.glob(os.path.join(run_dir, "*.tmp.*"))

# --------------------------------------------------------------------------- races


def lock_environment(lock, run_dir, noflock):
    """The environment that makes a link take ``lock``: the kernel's record lock, the file lock
    (forced), or the file lock because every lock call fails (Lustre noflock, by the shim)."""
    if lock == "kernel":
        return {}
    if lock == "file":
        return {rc.LOCK_ENV: "file"}
    return {"LD_PRELOAD": noflock, "NOFLOCK_DIR": run_dir}


@pytest.mark.parametrize("lock", ["kernel", "file", "lock calls refused"])
@pytest.mark.parametrize("round_number", range(3))
def test_two_links_for_one_predecessor_at_once(cluster, run_dir, round_number, lock, request):
    noflock = request.getfixturevalue("noflock") if lock == "lock calls refused" else None
    extra = lock_environment(lock, run_dir, noflock)
    script = cluster.write_script(run_dir)
    assert cluster.run_link(script, 100, **extra).returncode == 0
    successor = cluster.pending()[-1]
    cluster.finish(100, "FAILED", 30)
    cluster.update(latency=0.2)  # widen the window in which both run
    results = {}

    def link(job_id):
        results[job_id] = cluster.run_link(script, job_id, predecessor=100, mark_running=False,
                                           **extra)

    for job_id in (successor, "7000"):
        cluster.set_job(job_id, state="RUNNING")

    threads = [threading.Thread(target=link, args=(job,)) for job in (successor, "7000")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(result.returncode for result in results.values())
    assert statuses == [0, 2], {job: r.stderr for job, r in results.items()}
    loser = [result for result in results.values() if result.returncode == 2][0]
    assert "duplicate link" in loser.stderr
    winner = [job for job, result in results.items() if result.returncode == 0][0]
    assert read(run_dir, rc.CHAIN_FILE) == "100\n%s\n" % winner
    assert read(run_dir, rc.RETRIES_FILE) == "1\n" and read(run_dir, rc.WALLTIME_FILE) == "30\n"
    dependencies = [c["argv"] for c in cluster.calls("sbatch")]
    assert sum("--dependency=afternotok:100" in argv for argv in dependencies) == 1
    assert len(dependencies) == 2


def test_a_second_first_job_beside_a_live_chain_is_refused(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    result = cluster.run_link(script, 8000)
    assert result.returncode == 2 and "second chain" in result.stderr and "100 RUNNING" in result.stderr
    assert cluster.work_done() == ["100"] and cluster.pending() == [successor]
    cluster.finish(100, "COMPLETED", 5)
    cluster.set_job(successor, state="CANCELLED")
    before = len(squeue_of_jobs(cluster))
    result = cluster.run_link(script, 8001)
    assert result.returncode == 0, result.stderr
    assert read(run_dir, rc.CHAIN_FILE) == "8001\n"
    assert len(squeue_of_jobs(cluster)) - before == 1  # whether the old chain runs: asked once


def squeue_of_jobs(cluster):
    return [call for call in cluster.calls("squeue") if "-j" in call["argv"]]


@pytest.mark.parametrize("place, message", [
    ("runs", "holds chains ({tmp}/runs/a): status would show the new one alone"),
    ("runs/a/inner", "is inside the chain in {tmp}/runs/a, where status never looks"),
], ids=["a rendered chain above a chain", "a rendered chain inside a chain"])
def test_a_rendered_chains_first_job_refuses_where_submit_would(cluster, tmp_path, place,
                                                                 message):
    """render, then a pasted prologue's plain sbatch, made a chain submit refuses: status of the
    parent then showed it alone (--check passed over failed chains), and every submit below it
    was refused as inside it. render refuses it too: here the chain came after the render."""
    run_dir = str(tmp_path / place)
    script = cluster.write_script(run_dir)
    os.makedirs(str(tmp_path / "runs" / "a"), exist_ok=True)
    with open(str(tmp_path / "runs" / "a" / rc.CHAIN_FILE), "w") as handle:
        handle.write("5\n")
    before = sorted(os.listdir(run_dir))
    result = cluster.run_link(script, 8000)
    assert result.returncode == 2 and message.format(tmp=tmp_path) in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert cluster.work_done() == [] and cluster.calls("sbatch") == []
    assert not rc.holds_chain(run_dir) and not rc.holds_chain(str(tmp_path / "runs"))
    assert set(os.listdir(run_dir)) - set(before) <= {rc.LOCK_FILE}


def test_a_link_whose_module_was_moved_says_so_in_one_line(cluster, run_dir):
    script = cluster.write_script(run_dir)
    with open(script) as handle:
        text = handle.read()
    gone = os.path.join(cluster.root, "moved", "resumable_chain.py")
    with open(script, "w") as handle:
        handle.write(text.replace(rc.shell_quote(rc.module_path()), rc.shell_quote(gone)))
    result = cluster.run_link(script, 8000)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "error: cannot read the module %s (No such file or directory)" % gone in result.stderr
    assert result.stderr.count("\n") == 1 and cluster.work_done() == []


def test_an_unreachable_squeue_does_not_block_a_fresh_chain(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "COMPLETED", 5)
    os.unlink(os.path.join(cluster.bin, "squeue"))
    result = cluster.run_link(script, 8000)
    assert result.returncode == 0, result.stderr
    assert "cannot check whether the previous chain" in result.stderr
    assert read(run_dir, rc.CHAIN_FILE) == "8000\n"

# --------------------------------------------------------------------------- fuzzing

ALPHABET = "0123456789|:-+. \n\tabcXYZ=_()?,;$`'\"\\/*\u0661\u00e9\x00"
TOKENS = ["COMPLETED", "TIMEOUT", "CANCELLED by 0", "FAILED", "RUNNING", "PENDING", "NODE_FAIL",
          "JobState=", "RunTime=", "TimeLimit=", "afternotok:", "afterok:", "12", "0", "-",
          "2026-11-30T01:00:00", "Unknown", "|", "\n", ".batch", "UNLIMITED", "1-00:00:00"]
FUZZ_CASES = 3000


def fuzz_text(rng):
    parts = []
    for _ in range(rng.randint(0, 12)):
        if rng.random() < 0.5:
            parts.append(rng.choice(TOKENS))
        else:
            parts.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 6))))
    return "".join(parts)


@pytest.mark.parametrize("parser", ["parse_sacct", "summarize_sacct", "parse_scontrol",
                                    "sbatch_answer", "parse_walltime", "parse_duration", "parse_job_id",
                                    "parse_dependency", "base_state"])
def test_fuzz_parsers_raise_nothing_but_value_error(parser, capsys):
    rng = random.Random("%s-%s" % (SEED, parser))
    accepted = 0
    for _ in range(FUZZ_CASES):
        text = fuzz_text(rng)
        try:
            if parser == "summarize_sacct":
                for records in rc.parse_sacct(text).values():
                    job = rc.summarize_sacct(records)
                    assert job.elapsed >= 0
            elif parser == "sbatch_answer":  # of an sbatch that exited 0
                try:
                    rc.sbatch_answer(rc.SlurmResult(0, text, ""))
                except rc.StateError as error:  # it queued nothing: says what it printed
                    assert str(error).startswith("unexpected sbatch output ")
                    continue
            else:
                getattr(rc, parser)(text)
            accepted += 1
        except ValueError as error:
            assert parser in ("parse_walltime", "parse_job_id", "parse_dependency"), error
            assert str(error)
    with capsys.disabled():
        print("\nfuzz %s: %d inputs, %d accepted" % (parser, FUZZ_CASES, accepted))


@pytest.mark.parametrize("walltime, seconds", [
    ("90", 5400),  # a bare number in text is minutes, as sbatch reads --time
    (90, 90),  # an int is seconds, as every number of the Python API (decide's walltime too)
    ("5400s", 5400),
    ("2-00", 172800),
    (" 48:00:00 ", 172800),
    (0, None), (-60, None), (True, None), ("0", None), ("", None), ("90m", None), (None, None),
])
def test_walltime_units(walltime, seconds):
    if seconds is None:
        with pytest.raises(ValueError, match="invalid walltime"):
            rc.parse_walltime(walltime)
    else:
        assert rc.parse_walltime(walltime) == seconds


@pytest.mark.parametrize("situation, next_submit, elapsed, restarts", [
    ("requeued a minute after its first run ended", "2026-11-30T01:01:00", 70, 1),
    ("an ID reused hours later", "2026-11-30T03:00:00", 40, 1),
    ("no end time", None, 40, 1),
])
def test_sacct_runs_of_one_job_id_count_as_one_only_when_requeued(situation, next_submit,
                                                                     elapsed, restarts):
    first = rc.Job("7", "NODE_FAIL", 30, submit="2026-11-30T00:59:00",
                   start="2026-11-30T00:59:30", end=None if next_submit is None else
                   "2026-11-30T01:00:00")
    second = rc.Job("7", "TIMEOUT", 40, submit=next_submit or "2026-11-30T01:01:00",
                    start="2026-11-30T03:00:30")
    job = rc.summarize_sacct([second, first])
    assert (job.state, job.elapsed, job.restarts) == ("TIMEOUT", elapsed, restarts)


@pytest.mark.parametrize("state,options,message", [
    pytest.param("TIMEOUT", {"max_walltime": "48:00:00"}, "max_walltime must be a whole number",
                 id="a driver's max_walltime text"),
    pytest.param("FAILED", {"retries": 1.5}, "retries must be a whole number",
                 id="a counter that is not whole"),
    pytest.param("TIMEOUT", {"max_retries": True}, "max_retries must be a whole number",
                 id="a bool for a count"),
    pytest.param("TIMEOUT", {"elapsed": "00:05:00"}, "got '00:05:00'",
                 id="sacct's Elapsed text unparsed"),
    pytest.param("TIMEOUT", {"elapsed": b"5"}, "got b'5'", id="bytes for elapsed"),
    pytest.param("TIMEOUT", {"elapsed": True}, "got True", id="a bool for elapsed"),
    pytest.param("TIMEOUT", {"elapsed": -1}, "got -1", id="negative elapsed seconds"),
    pytest.param("FAILED", {"elapsed": -1}, "decide: elapsed must be seconds, 0 or more, or None",
                 id="a bad elapsed named alone, not the valid state"),
    pytest.param("", {}, "(got '')", id="an empty state (not a first job: that is None)"),
    pytest.param(75, {}, "(got 75)", id="a number for the state"),
    pytest.param("FAILED", {"exit_code": 75.0}, "exit_code must be Slurm's ExitCode",
                 id="a float exit code (a driver's YAML)"),
    pytest.param("FAILED", {"exit_code": True}, "got True", id="a bool for the exit code"),
    pytest.param("FAILED", {"exit_code": "abc"}, "got 'abc'", id="text that is no exit code"),
    pytest.param("FAILED", {"exit_code": 300}, "got 300", id="an exit status over 255"),
    pytest.param("FAILED", {"exit_code": "300:0"}, "got '300:0'", id="an ExitCode over 255"),
    pytest.param("FAILED", {"exit_code": ""}, "got ''", id="an empty exit code (None: not known)"),
])
def test_decide_refuses_what_no_job_reports_with_one_line(state, options, message):
    with pytest.raises(ValueError) as caught:
        rc.decide(state, **options)
    assert "\n" not in str(caught.value) and message in str(caught.value)


@pytest.mark.parametrize("state,decided", [
    pytest.param("not_visible", ("resume", 0), id="NOT_VISIBLE in lower case: no retry counted"),
    pytest.param("completed", ("complete", 0), id="a state in lower case"),
    pytest.param("Timeout", ("resume", 0), id="a state in mixed case"),
])
def test_decide_reads_a_state_in_any_case(state, decided):
    assert rc.decide(state)[:2] == decided


def test_fuzz_decide_keeps_the_table_invariants():
    # Properties any correct table has, checked without restating the table: random states
    # (fuzzed text too), counters and caps.
    rng = random.Random(SEED)
    for _ in range(FUZZ_CASES * 3):
        state = rng.choice([None, rc.NOT_VISIBLE, fuzz_text(rng)] + TOKENS)
        retries, max_retries = rng.randint(0, 10), rng.randint(0, 5)
        walltime, cap = rng.randint(0, 10 ** 6), rng.choice([None, rng.randint(1, 10 ** 6)])
        if state is not None and not state.strip():  # no job reports a blank state
            with pytest.raises(ValueError):
                rc.decide(state, retries=retries)
            continue
        decision = rc.decide(state, retries=retries, walltime=walltime, max_retries=max_retries,
                             max_walltime=cap)
        assert decision.action in rc.ACTIONS and decision.reason
        if state is None:
            assert decision[:2] == ("start", 0)
            continue
        counted = decision.retries == retries + 1
        assert counted or decision.retries == retries  # at most one retry per link
        assert (decision.action == "fail") == (counted and decision.retries > max_retries)
        uncapped = rc.decide(state, retries=retries, walltime=walltime, max_retries=max_retries)
        if decision != uncapped:  # a cap only ever turns a resume into a stop
            assert (uncapped.action, decision.action) == ("resume", "stop")
        later = rc.decide(state, retries=retries, walltime=walltime + rng.randint(0, 10 ** 6),
                          max_retries=max_retries, max_walltime=cap)
        if decision.action == "stop":  # more walltime never resumes a stopped chain
            assert later.action == "stop"


def test_a_chain_on_a_mount_without_locks_counts_right(cluster, run_dir, noflock, capsys):
    """Lustre -o noflock: every lock call fails with ENOSYS (the shim); the file lock takes over."""
    extra = lock_environment("lock calls refused", run_dir, noflock)
    script = cluster.write_script(run_dir, max_retries=1)
    first = cluster.run_link(script, 100, **extra)
    assert first.returncode == 0, first.stderr
    assert "lock: file (.resumable_chain.lock.held): lock calls refused here (Function not " \
           "implemented)" in first.stderr
    links = [("100", "TIMEOUT", 60), ("1000", "FAILED", 20), ("1001", "COMPLETED", 5)]
    for (job, state, elapsed), (successor, _, _) in zip(links, links[1:]):
        cluster.finish(job, state, elapsed)
        result = cluster.run_link(script, successor, predecessor=job, **extra)
        assert result.returncode == 0, result.stderr
    cluster.finish("1001", "COMPLETED", 5)
    result = cluster.run_link(script, "1002", predecessor="1001", **extra)
    assert result.returncode == 0 and "complete | predecessor 1001 COMPLETED" in result.stderr
    assert read(run_dir, rc.CHAIN_FILE).split() == ["100", "1000", "1001"]
    assert read(run_dir, rc.WALLTIME_FILE) == "85\n" and read(run_dir, rc.RETRIES_FILE) == "1\n"
    assert not os.path.exists(os.path.join(run_dir, rc.LOCK_FILE + rc.HELD_SUFFIX))
    status = subprocess.run([sys.executable, rc.__file__, "status", run_dir],
                            env=cluster.env(**extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True)
    assert status.returncode == 0, status.stderr
    assert "lock: file (lock calls refused here (Function not implemented))" in status.stdout
    assert "verdict: finished" in status.stdout


INCREMENT = """
import sys, time
sys.path.insert(0, sys.argv[1])
import resumable_chain as rc
store = rc.chain_store(sys.argv[2])
for _ in range(int(sys.argv[3])):
    with store.locked():
        value = store.read_counter(rc.RETRIES_FILE) or 0
        time.sleep(0.01)  # a read-modify-write that loses updates unless the lock excludes
        store.write_text(rc.RETRIES_FILE, "%d\\n" % (value + 1))
"""


@pytest.mark.parametrize("locks", [("kernel",) * 4, ("file",) * 4, ("lock calls refused",) * 4,
                                   ("kernel", "file", "kernel", "file")],
                         ids=["kernel", "file", "lock calls refused", "kernel and file at once"])
def test_the_lock_excludes_every_other_writer(tmp_path, request, locks):
    run_dir = str(tmp_path / "run")
    os.makedirs(run_dir)
    noflock = request.getfixturevalue("noflock") if "lock calls refused" in locks else None
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    writers = [subprocess.Popen([sys.executable, "-c", INCREMENT, root, run_dir, "15"],
                                env=dict(os.environ, **lock_environment(lock, run_dir, noflock)))
               for lock in locks]
    assert [writer.wait(timeout=120) for writer in writers] == [0] * len(locks)
    assert read(run_dir, rc.RETRIES_FILE) == "%d\n" % (15 * len(locks))
    assert not glob.glob(os.path.join(run_dir, "*.held*"))


@pytest.mark.parametrize("lock", ["kernel", "file"])
@pytest.mark.parametrize("holder_cluster,job_over,broken", [
    (None, True, True), ("here", True, True), ("here", False, False), ("here", None, False),
    ("elsewhere", True, False),
], ids=["its job ended", "its job on this cluster ended", "its job still runs",
        "Slurm cannot tell", "a job of another cluster"])
def test_a_file_lock_held_by_a_job_on_another_host_is_broken_only_once_the_job_ended(
        tmp_path, monkeypatch, lock, holder_cluster, job_over, broken):
    run_dir = str(tmp_path)
    held = os.path.join(run_dir, rc.LOCK_FILE + rc.HELD_SUFFIX)
    rc._create_held(held, rc.Holder(holder_cluster, "555", "another-node", 1, 0, "theirs"))
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "here")
    if lock == "file":
        monkeypatch.setenv(rc.LOCK_ENV, "file")
    else:
        monkeypatch.delenv(rc.LOCK_ENV, raising=False)
    asked = []
    store = rc.StateStore(run_dir, job_over=lambda job: asked.append(job) or job_over)
    try:
        with store.locked(wait=0):
            holder = store._read_holder(held)
            assert holder is None if lock == "kernel" else holder.host == os.uname().nodename
        entered = True
    except rc.StateError as error:
        assert "job 555, host another-node" in str(error)
        entered = False
    assert entered == broken
    assert os.path.exists(held) != broken
    assert asked == ([] if holder_cluster == "elsewhere" else ["555"])


@pytest.mark.parametrize("reader", ["a state file", "the lock's holder file"])
def test_a_file_created_just_after_a_failed_open_reads_as_missing(tmp_path, monkeypatch, reader):
    """Another writer creates the file between our open (ENOENT) and any look after it: the
    open's own answer counts (a look afterwards had failed a link under load)."""
    store = rc.StateStore(str(tmp_path))
    path = store.path(rc.WALLTIME_FILE) if reader == "a state file" else str(tmp_path / "held")
    open_fresh = rc._open_fresh

    def racing_open(name, *args):
        try:
            return open_fresh(name, *args)
        finally:
            with open(path, "w") as handle:  # the other writer, just too late for this open
                handle.write("60\n")
    monkeypatch.setattr(rc, "_open_fresh", racing_open)
    if reader == "a state file":
        assert store.read_bytes(rc.WALLTIME_FILE) is None
    else:
        assert store._read_holder(path) is None


# --------------------------------------------------------------------------- shared filesystems


@pytest.mark.parametrize("view", ["one link behind", "no state file visible"])
def test_a_lagging_view_of_the_run_dir_is_waited_for(cluster, run_dir, view):
    """The successor starts on a node whose client still shows the state before its predecessor
    (NFS caches): it waits for the view instead of refusing, and continues."""
    script = cluster.write_script(run_dir)
    assert cluster.run_link(script, 100).returncode == 0
    before = {name: read(run_dir, name) for name in (rc.CHAIN_FILE, rc.JOURNAL_FILE)}
    cluster.finish(100, "TIMEOUT", 60)
    assert cluster.run_link(script, 1000, predecessor=100).returncode == 0
    names = [name for name in os.listdir(run_dir) if name.startswith(".") and
             os.path.isfile(os.path.join(run_dir, name)) and name != rc.LOCK_FILE]
    cluster.finish(1000, "TIMEOUT", 60)
    thread = stale_view(run_dir, names, before if view == "one link behind" else {})
    result = cluster.run_link(script, 1001, predecessor=1000)
    thread.join()
    assert result.returncode == 0, result.stderr
    assert "the run directory's view lagged (a client cache): waited" in result.stderr
    assert "resume | predecessor 1000 TIMEOUT" in result.stderr
    assert read(run_dir, rc.CHAIN_FILE).split() == ["100", "1000", "1001"]
    assert read(run_dir, rc.WALLTIME_FILE) == "120\n"


def test_a_view_that_never_catches_up_is_refused_after_the_wait(tmp_path, monkeypatch):
    run_dir = str(tmp_path / "run")
    store = rc.StateStore(run_dir)
    os.makedirs(run_dir)
    store.write_text(rc.CHAIN_FILE, "100\n")
    store.write_record(rc.Record(job="100", action="start", walltime=0, retries=0, max_retries=3,
                                 link=1, successor="1000", phase="queued"))
    monkeypatch.setattr(rc, "run_slurm", in_process_slurm(str(tmp_path), {"1000": ("TIMEOUT", 60)}))
    now, listed = [0.0], []
    wait_for_view = rc.wait_for_view

    def sleep(seconds):  # a clock of its own: the whole wait is taken, at no cost in real time
        now[0] += seconds
    monkeypatch.setattr(rc.os, "listdir", lambda path, listdir=os.listdir: listed.append(
        path) or listdir(path))
    monkeypatch.setattr(rc, "wait_for_view", lambda *args: wait_for_view(
        *args, sleep=sleep, clock=lambda: now[0]))
    with pytest.raises(rc.StateError, match="continues job 1000, which is not the last link"):
        rc.run_link(run_dir, rc.Settings(3, None), rc.NextLink(TRUE_SCRIPT, [], [], "lag"),
                    {"SLURM_JOB_ID": "1001", "SLURM_JOB_DEPENDENCY": "afternotok:1000"})
    assert now[0] >= rc.VIEW_WAIT_SECONDS  # it waited the whole window before refusing
    assert listed.count(run_dir) >= rc.VIEW_WAIT_SECONDS  # re-reading the directory each second
    assert read(run_dir, rc.CHAIN_FILE) == "100\n"


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 2 MB tmpfs (root only) to fill between two links."""
    point = str(tmp_path / "tmpfs")
    os.makedirs(point)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", point],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True) if os.geteuid() == 0 else None
    if mounted is None or mounted.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail("cannot mount a tmpfs: .ci/run runs the tests as root")
        pytest.skip("mounting a tmpfs needs root (%s)" % (mounted.stdout.strip() if mounted
                                                         else "not root"))
    yield point
    subprocess.run(["umount", "-l", point])


def test_a_disk_that_fills_between_links_changes_nothing_and_resume_continues(
        cluster, small_tmpfs, capsys, monkeypatch):
    run_dir = os.path.join(small_tmpfs, "run")
    script = cluster.write_script(run_dir)
    assert cluster.run_link(script, 100).returncode == 0
    successor = cluster.pending()[-1]
    cluster.finish(100, "TIMEOUT", 60)
    filler = os.path.join(small_tmpfs, "filler")
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(descriptor, b"x" * 4096)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(descriptor)
    files = {name: read(run_dir, name) for name in os.listdir(run_dir)
             if os.path.isfile(os.path.join(run_dir, name))}
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "No space left on device" in errors[0] and run_dir in errors[0]
    assert {name: read(run_dir, name) for name in files} == files
    assert sorted(os.listdir(run_dir)) == sorted(files)  # no temp file left either
    assert successor not in cluster.work_done() and len(cluster.calls("sbatch")) == 1
    cluster.finish(successor, "FAILED", 0)
    os.unlink(filler)
    status, out, err = run_cli(cluster, capsys, monkeypatch, "resume", run_dir)
    assert status == 0, err
    assert read(run_dir, rc.WALLTIME_FILE) == "60\n"  # link 100, counted once, by resume


def test_one_process_never_holds_a_run_directorys_lock_twice(tmp_path):
    """lockf locks are the process's: a second lock of the file is granted at once, and its
    close drops the first (resume journaled its event so under its own lock: histories spun)."""
    store = rc.chain_store(str(tmp_path))
    with store.locked():
        with pytest.raises(RuntimeError):
            with rc.chain_store(str(tmp_path)).locked():
                pass
        assert rc.LOCKS_HELD == {store.path(rc.LOCK_FILE)}
    assert rc.LOCKS_HELD == set()
    with store.locked():  # released whole: locked again at once
        pass


# --------------------------------------------------------------------------- random fault histories

HISTORIES = 300  # the default run: about 10 s
HISTORY_SEED = 20261201


@pytest.mark.parametrize("lag_steps", [
    0, histories.LAG_STEPS],
    ids=["without lagging views", "with lagging views"])
def test_random_histories(request, capsys, lag_steps):
    """tests/histories.py: random fault histories of one chain, every invariant checked after
    every step; a violation prints the seed and the history (replay: --history-seed S
    --histories 1, or python3 tests/histories.py --seed S --histories 1)."""
    count = request.config.getoption("--histories") or int(
        os.environ.get("RESUMABLE_CHAIN_HISTORIES") or HISTORIES)
    seed = request.config.getoption("--history-seed")
    seed = int(os.environ.get("RESUMABLE_CHAIN_HISTORY_SEED") or HISTORY_SEED) \
        if seed is None else seed
    started = time.time()
    done, faults = histories.run_histories(count, seed, FAST_DIR, lag_steps=lag_steps)
    with capsys.disabled():
        print("\nrandom histories: %d (seeds %d-%d) in %.0f s, %d faults injected (%s), "
              "0 violations" % (done, seed, seed + done - 1, time.time() - started,
                                sum(faults.values()), ", ".join("%s %d" % item
                                                                for item in sorted(faults.items()))))
    assert done == count and len(faults) >= 10  # most kinds of fault were injected
    assert ("lagging view" in faults) == (lag_steps > 0)


class LaggingChain(object):
    """A chain driven step by step in-process against the fake Slurm, each step optionally
    through a lagging view of the run directory (tests/histories.py's), as the random
    histories with lagging views drive it."""

    def __init__(self, tmp_path, monkeypatch):
        self.run_dir = str(tmp_path / "run")
        self.slurm = in_process_slurm(str(tmp_path), {})
        self.path, self.view, self.skipped = self.slurm.path, None, 0.0
        monkeypatch.setattr(rc, "run_slurm", self.slurm)
        monkeypatch.setenv(rc.VIEW_WAIT_ENV, str(rc.VIEW_WAIT_SECONDS))  # as on NFS
        monkeypatch.setattr(rc.StateStore, "read_bytes", histories.reading_through(
            rc.StateStore.read_bytes, lambda: self.view))

    def seen(self):
        """The run directory's state files now, for a later step that lags."""
        return histories.directory_state(self.run_dir)

    def clock(self):
        """Real time, plus the pauses of a guard's looks (taken at no cost in real time)."""
        return time.monotonic() + self.skipped

    def sleep(self, seconds):
        self.skipped += seconds

    def lagging(self, stale, seconds=2):
        """The next steps see ``stale`` for ``seconds`` (a wait of the module's)."""
        started = self.clock()
        self.view = histories.LaggingView(os.path.abspath(self.run_dir), stale, seconds,
                                          lambda: self.clock() - started)

    def set_job(self, job_id, **fields):
        cluster = fake_slurm.load(self.path)
        cluster["jobs"].setdefault(job_id, {}).update(fields)
        fake_slurm.save(self.path, cluster)

    def prologue(self, job_id, predecessor=None):
        self.set_job(job_id, state="RUNNING", start="2026-11-30T01:00:00")
        environ = {"SLURM_JOB_ID": job_id, "SLURM_JOB_NAME": "job.sh"}
        if predecessor:
            environ["SLURM_JOB_DEPENDENCY"] = "afternotok:%s" % predecessor
        try:
            return rc.run_link(self.run_dir, rc.Settings(3, None),
                               rc.NextLink(TRUE_SCRIPT, [], [], "job.sh"), environ)
        finally:
            self.view = None

    def background(self, job_id):
        rc.finish_queueing(self.run_dir, {"SLURM_JOB_ID": job_id})

    def ends(self, job_id, state, elapsed=60):
        self.set_job(job_id, state=state, elapsed=elapsed, start="2026-11-30T01:00:00",
                     end="2026-11-30T01:01:00")

    def guard(self, job_id):
        """The guard of ``job_id`` runs, with the words its link queued it with."""
        guard, job = [(guard, job) for guard, job in self.slurm.jobs().items()
                      if job.get("wrap") and job["dependency"] == "afterany:" + job_id][-1]
        after = [word.partition("=")[2] for word in job["wrap"].split() if
                 word.startswith("--after=")]
        self.set_job(guard, state="RUNNING")
        try:
            return rc.guard_chain(self.run_dir, job_id, {"SLURM_JOB_ID": guard},
                                  sleep=self.sleep, clock=self.clock, after=(after or [None])[-1])
        finally:
            self.view = None
            self.set_job(guard, state="COMPLETED")

    def pending(self, guards=False):
        return sorted(job_id for job_id, job in self.slurm.jobs().items()
                      if job["state"] == "PENDING" and bool(job.get("wrap")) == guards)

    def record(self):
        return rc.StateStore(self.run_dir).read_record()


@pytest.fixture
def lagging_chain(tmp_path, monkeypatch):
    """A first link 100 that queued its successor 5000 and that one's guard, then TIMEOUT."""
    chain = LaggingChain(tmp_path, monkeypatch)
    assert chain.prologue("100").record.successor == "5000"
    chain.background("100")
    chain.ends("100", "TIMEOUT", 3600)
    return chain


def test_history_1167143_a_person_cancels_after_the_work_finished_unseen_and_status_says_stopped(
        capsys):
    """The work finished in a link whose node then failed (no exit told the chain); its
    successor ran, and a person cancelled the chain: stopped, not finished, is status's truth."""
    histories.run_histories(1, 1167143, FAST_DIR)


def test_history_1152_a_guard_whose_view_lags_does_not_replace_a_link_that_ran_its_prologue(
        lagging_chain):
    # Found by the random histories with lagging views (seed 1152, a view one step behind):
    # link 5000 ran its prologue (queued 5001) and was preempted within a second, before its
    # background step; its guard read the journal as link 100 left it, took 5000 for a link that
    # died before its prologue, queued a replacement and wrote that stale journal over 5000's:
    # two continuations, and 5001's prologue refused ("not the last link of the chain").
    chain = lagging_chain
    before = chain.seen()
    assert chain.prologue("5000", predecessor="100").record.successor == "5001"
    chain.ends("5000", "PREEMPTED", 1)
    chain.lagging(before)
    chain.guard("5000")
    record = chain.record()
    assert (record.job, record.successor) == ("5000", "5001")
    assert chain.pending() == ["5001"]


def test_history_659_the_guard_of_a_replacement_link_waits_for_the_journal_that_names_it(
        lagging_chain):
    # Found by the random histories with lagging views (seed 659): successor 5000 died at
    # launch, its guard queued 5001 in its place; 5001 died at launch too, and its guard read
    # the journal as it was before that replacement: "nothing to guard: the chain went on
    # without job 5001". Nothing continued the chain and no `broken` event said so.
    chain = lagging_chain
    chain.ends("5000", "NODE_FAIL", 0)
    before = chain.seen()
    event, _, words = chain.guard("5000")
    assert event.event == "healed" and chain.record().successor == "5001", words
    chain.ends("5001", "NODE_FAIL", 0)
    chain.lagging(before)
    event, _, words = chain.guard("5001")
    assert event is not None and event.event in ("healed", "broken"), words
    assert chain.record().successor not in ("5000", "5001")


def test_history_39_a_link_queued_by_a_guard_knows_its_guard_through_a_lagging_view(
        lagging_chain):
    # Found by the random histories with lagging views (seed 39): link 5000's sbatch failed and
    # it ended; its guard queued 5001 and 5001's guard. 5001 read the journal as 5000 left it
    # (no successor, no guard), took itself for unguarded, queued its successor's guard and
    # left its own pending: two guards pending at once (invariant 5).
    chain = lagging_chain
    fake_slurm.save(chain.path, dict(fake_slurm.load(chain.path), sbatch_error="busy"))
    assert chain.prologue("5000", predecessor="100").record.successor is None
    fake_slurm.save(chain.path, dict(fake_slurm.load(chain.path), sbatch_error=None))
    chain.background("5000")
    chain.ends("5000", "NODE_FAIL", 7)
    before = chain.seen()
    event, _, words = chain.guard("5000")
    assert event.event == "healed" and chain.record().successor == "5001", words
    chain.lagging(before)
    assert chain.prologue("5001", predecessor="5000").record.successor == "5002"
    chain.background("5001")
    assert len(chain.pending(guards=True)) == 1, chain.pending(guards=True)


def chain_at_its_second_link(tmp_path, monkeypatch, guard):
    """A run directory whose first link 100 TIMEOUT and queued 1000 (guarded by ``guard``, or
    not), the fake Slurm in-process; returns (run_dir, the Slurm commands made, by words)."""
    run_dir = str(tmp_path / "run")
    os.makedirs(run_dir)
    store = rc.StateStore(run_dir)
    store.write_text(rc.CHAIN_FILE, "100\n")
    store.write_record(rc.Record(job="100", action="start", walltime=0, retries=0, max_retries=3,
                                 max_walltime=3600, link=1, successor="1000", guard=guard,
                                 next=rc.NextLink(TRUE_SCRIPT, [], [], "job.sh")._asdict(),
                                 phase="queued"))
    slurm = in_process_slurm(str(tmp_path), {"100": ("TIMEOUT", 60)})
    cluster = fake_slurm.load(slurm.path)
    cluster["jobs"]["100"]["in_controller"] = True
    cluster["jobs"]["1000"] = {"state": "RUNNING", "start": "2026-11-30T01:00:00",
                               "time_limit": 120, "dependency": "afternotok:100"}
    if guard:
        cluster["jobs"][guard] = {"state": "PENDING", "wrap": "guard", "dependency":
                                  "afterany:1000"}
    fake_slurm.save(slurm.path, cluster)
    calls = []

    def recorded(argv, *args, **kwargs):
        words = [word for word in argv if word in ("show", "update", "--wrap") or
                 word.startswith(("TimeLimit=", "Requeue=", "--dependency="))]
        calls.append(" ".join([argv[0]] + words))
        return slurm(argv, *args, **kwargs)
    monkeypatch.setattr(rc, "run_slurm", recorded)
    return run_dir, calls


@pytest.mark.parametrize("guard,before_work,while_working", [
    ("1500", ["scontrol show", "sbatch --dependency=afternotok:1000"],
     ["sbatch --dependency=afterany:5000 --wrap", "scancel", "scontrol show",
      "scontrol update TimeLimit=59"]),
    (None, ["scontrol show", "sbatch --dependency=afternotok:1000",  # is it guarded after all?
            "squeue", "sbatch --dependency=afterany:5000 --wrap"],
     ["scontrol show", "scontrol update TimeLimit=59"]),
], ids=["a guarded link", "a link without a guard of its own"])
def test_only_the_successors_sbatch_precedes_the_work_of_a_guarded_link(
        tmp_path, monkeypatch, guard, before_work, while_working):
    run_dir, calls = chain_at_its_second_link(tmp_path, monkeypatch, guard)
    outcome = rc.run_link(run_dir, rc.Settings(3, 3600), rc.NextLink(TRUE_SCRIPT, [], [], "job.sh"),
                          {"SLURM_JOB_ID": "1000", "SLURM_JOB_DEPENDENCY": "afternotok:100"})
    assert outcome.status == rc.EXIT_WORK and outcome.record.successor == "5000"
    assert outcome.record.time_limit == 3540  # exported: whole minutes of what the cap leaves
    assert calls == before_work
    del calls[:]
    record, warnings = rc.finish_queueing(run_dir, {"SLURM_JOB_ID": "1000"})
    assert calls == while_working and warnings == []
    assert rc.StateStore(run_dir).read_record() == record and record.guard == "900000"


class StillTrying(Exception):
    """Raised by a test's sleep once a loop has tried enough times to show it goes on."""


@pytest.mark.parametrize("shell_alive", [True, False],
                         ids=["its batch shell still runs", "its batch shell is gone"])
def test_a_link_without_successor_or_guard_tries_to_queue_its_guard_only_while_it_runs(
        tmp_path, monkeypatch, shell_alive):
    # The background step of a link whose sbatch failed before its work tries again every minute
    # while the link runs; once the controller forgot the ended job (MinJobAge), only the batch
    # shell's end tells it to stop (steps the fast suite left behind still looped an hour later).
    run_dir = str(tmp_path / "run")
    os.makedirs(run_dir)
    rc.StateStore(run_dir).write_record(rc.Record(job="1000", action="resume", walltime=0,
                                                  retries=0, max_retries=3, link=2))
    path = str(tmp_path / "cluster.json")
    fake_slurm.save(path, {"next_id": 5000, "jobs": {}, "sbatch_error": "Socket timed out"})
    calls = []
    slurm = fake_slurm.InProcess(path)
    monkeypatch.setattr(rc, "run_slurm", lambda argv, *args, **kwargs: calls.append(
        argv[0]) or slurm(argv, *args, **kwargs))
    shell, slept = subprocess.Popen(["sleep", "60"]), []

    def sleep(seconds):
        slept.append(seconds)
        if not shell_alive:
            shell.kill()  # the link ends while the step waits
            shell.wait()
        if len(slept) > 5:
            raise StillTrying
    environ = {"SLURM_JOB_ID": "1000", "SLURM_TASK_PID": str(shell.pid)}
    if shell_alive:
        with pytest.raises(StillTrying):
            rc.guard_until_queued(run_dir, environ, sleep=sleep)
        assert calls.count("sbatch") == 5
        shell.kill()
    else:
        assert rc.guard_until_queued(run_dir, environ, sleep=sleep) is None
        assert calls == [] and len(slept) == 1


@pytest.mark.parametrize("successor_died", [False, True],
                         ids=["the successor dies at launch later", "it died at launch first"])
def test_a_link_that_ends_before_its_background_step_leaves_its_successor_to_its_own_guard(
        tmp_path, monkeypatch, successor_died):
    # Its guard runs when it ends: it queues the successor's guard, which replaces the successor
    # when it dies at launch, or it replaces a successor that died already: the chain goes on.
    run_dir, calls = chain_at_its_second_link(tmp_path, monkeypatch, "1500")
    rc.run_link(run_dir, rc.Settings(3, 3600), rc.NextLink(TRUE_SCRIPT, [], [], "job.sh"),
                {"SLURM_JOB_ID": "1000", "SLURM_JOB_DEPENDENCY": "afternotok:100"})
    path = os.path.join(str(tmp_path), "cluster.json")

    def ends(job_id, state):
        cluster = fake_slurm.load(path)
        cluster["jobs"][job_id].update(state=state, start="2026-11-30T01:00:02",
                                       end="2026-11-30T01:00:03")
        fake_slurm.save(path, cluster)
    ends("1000", "NODE_FAIL")
    if successor_died:
        ends("5000", "NODE_FAIL")
    clock = histories.OwnClock()
    event, _, words = rc.guard_chain(run_dir, "1000", {"SLURM_JOB_ID": "1500"},
                                     sleep=clock.sleep, clock=clock)
    if not successor_died:
        assert words == ("job 1000 ended before its successor 5000 had a guard: queued guard "
                         "900000")
        assert rc.StateStore(run_dir).read_record().guard == "900000"
        ends("5000", "NODE_FAIL")
        event, _, words = rc.guard_chain(run_dir, "5000", {"SLURM_JOB_ID": "900000"},
                                         sleep=clock.sleep, clock=clock)
    assert event.event == "healed" and "job 5000 died before its prologue" in words, words
    record = rc.StateStore(run_dir).read_record()
    assert (record.job, record.successor, record.node_deaths) == ("1000", "5001", 1)


def test_a_link_that_completed_before_its_background_step_finishes_the_chain_through_its_guard(
        tmp_path, monkeypatch):
    # Its work completed at once: Slurm cancelled the unstarted successor (no node), which did
    # not die: the link's own guard journals the chain's end, and queues nothing.
    run_dir, calls = chain_at_its_second_link(tmp_path, monkeypatch, "1500")
    rc.run_link(run_dir, rc.Settings(3, 3600), rc.NextLink(TRUE_SCRIPT, [], [], "job.sh"),
                {"SLURM_JOB_ID": "1000", "SLURM_JOB_DEPENDENCY": "afternotok:100"})
    path = os.path.join(str(tmp_path), "cluster.json")
    cluster = fake_slurm.load(path)
    cluster["jobs"]["1000"].update(state="COMPLETED", start="2026-11-30T01:00:02",
                                   end="2026-11-30T01:00:03")
    cluster["jobs"]["5000"].update(state="CANCELLED", end="2026-11-30T01:00:03",
                                   reason="DependencyNeverSatisfied")
    fake_slurm.save(path, cluster)
    clock = histories.OwnClock()
    event, _, words = rc.guard_chain(run_dir, "1000", {"SLURM_JOB_ID": "1500"},
                                     sleep=clock.sleep, clock=clock)
    assert event.event == "finished" and "Slurm cancelled its successor 5000" in words, words
    assert [job for job in fake_slurm.load(path)["jobs"] if int(job) > 5000] == []


def stale_view(run_dir, names, before, seconds=3):
    """Show ``before`` ({file: text}; the other ``names`` missing) of the run directory now and
    its current version after ``seconds``, as an NFS client that lags would; returns the thread
    that catches up."""
    after = {name: read(run_dir, name) for name in names}
    for name in names:
        os.unlink(os.path.join(run_dir, name))
    for name, text in before.items():
        with open(os.path.join(run_dir, name), "w") as handle:
            handle.write(text)

    def catch_up():
        time.sleep(seconds)
        for name, text in after.items():
            with open(os.path.join(run_dir, name + ".new"), "w") as handle:
                handle.write(text)
            os.replace(os.path.join(run_dir, name + ".new"), os.path.join(run_dir, name))
    thread = threading.Thread(target=catch_up)
    thread.start()
    return thread


@pytest.mark.parametrize("queued_by", ["the guard of a successor that died"])
def test_a_job_without_a_predecessor_waits_for_a_lagging_view_and_never_starts_fresh(
        cluster, run_dir, capsys, monkeypatch, queued_by):
    # Issue 29: a job queued without a dependency (a guard's replacement, a resumed link) read
    # a journal one link stale, took itself for a first job and reset the chain.
    script = cluster.write_script(run_dir, max_retries=0)
    assert cluster.run_link(script, 100).returncode == 0
    [successor] = cluster.pending()
    names = (rc.CHAIN_FILE, rc.JOURNAL_FILE, rc.WALLTIME_FILE, rc.RETRIES_FILE)
    before = {name: read(run_dir, name) for name in names if os.path.exists(
        os.path.join(run_dir, name))}
    if queued_by == "resume":
        cluster.finish(100, "FAILED", 60)
        assert cluster.run_link(script, successor, predecessor=100).returncode == 1  # failed
        cluster.finish(successor, "FAILED", 0)
        before = {name: read(run_dir, name) for name in names}
        status, out, err = run_cli(cluster, capsys, monkeypatch, "resume", run_dir)
        assert status == 0, err
        new = out.strip()
    else:
        cluster.finish(100, "TIMEOUT", 60)
        cluster.set_job(successor, state="NODE_FAIL", start="2026-11-30T01:01:00",
                        end="2026-11-30T01:01:00")
        assert cluster.run_guard(successor).returncode == 0
        [new] = cluster.pending()
    thread = stale_view(run_dir, names, before)
    result = cluster.run_link(script, new)  # no dependency
    thread.join()
    assert result.returncode == 0, result.stderr
    assert "waited" in result.stderr and "until the journal named job %s" % new in result.stderr
    assert "starting fresh" not in result.stderr
    assert read(run_dir, rc.CHAIN_FILE).split()[0] == "100"  # the chain's history is kept
    assert int(read(run_dir, rc.WALLTIME_FILE)) >= 60


def test_a_job_without_a_predecessor_that_the_journal_never_names_is_refused_after_the_wait(
        tmp_path, monkeypatch):
    run_dir = str(tmp_path / "run")
    store = rc.StateStore(run_dir)
    os.makedirs(run_dir)
    store.write_text(rc.CHAIN_FILE, "100\n")
    store.write_text(rc.WALLTIME_FILE, "60\n")
    store.write_record(rc.Record(job="100", action="resume", walltime=60, retries=0,
                                 max_retries=3, link=1, successor="1000", phase="queued"))
    monkeypatch.setattr(rc, "run_slurm", in_process_slurm(str(tmp_path), {"100": ("TIMEOUT", 60)}))
    waited, now = [], [0.0]

    def sleep(seconds):
        waited.append(seconds)
        now[0] += seconds
    snapshot = store.snapshot()
    with pytest.raises(rc.StateError, match="job 1001 has no predecessor, but the chain in .* "
                                            "goes on .* not starting a fresh chain over it"):
        rc.wait_to_be_named(store, snapshot, "1001", {}, [], sleep=sleep,
                            clock=lambda: now[0])
    assert sum(waited) >= rc.VIEW_WAIT_SECONDS  # it waited the whole window first
    assert read(run_dir, rc.CHAIN_FILE) == "100\n" and read(run_dir, rc.WALLTIME_FILE) == "60\n"


def test_a_first_job_over_a_chain_that_ended_keeps_the_old_files(cluster, run_dir):
    script = cluster.write_script(run_dir)
    assert cluster.run_link(script, 100).returncode == 0
    cluster.finish(100, "COMPLETED", 60)  # the work finished; no link was left to say so
    cluster.finish(cluster.pending()[-1], "CANCELLED", 0)
    old = read(run_dir, rc.JOURNAL_FILE)
    assert cluster.run_link(script, 200, mark_running=True).returncode == 0  # sbatch job.sh again
    assert read(run_dir, rc.CHAIN_FILE) == "200\n"
    assert read(run_dir, rc.JOURNAL_FILE + rc.PREVIOUS_SUFFIX) == old
    assert read(run_dir, rc.CHAIN_FILE + rc.PREVIOUS_SUFFIX) == "100\n"


def test_a_guard_that_reads_a_journal_one_link_behind_waits_and_replaces_the_dead_successor(
        cluster, run_dir):
    # Issue 29 (a): the guard read a stale journal in which its job was neither the current
    # link nor its successor, said "nothing to guard" and the chain was lost, unannounced.
    script = cluster.write_script(run_dir)
    assert cluster.run_link(script, 100).returncode == 0
    names = (rc.CHAIN_FILE, rc.JOURNAL_FILE, rc.WALLTIME_FILE, rc.RETRIES_FILE)
    before = {name: read(run_dir, name) for name in names if os.path.exists(
        os.path.join(run_dir, name))}
    [link] = cluster.pending()
    cluster.finish(100, "TIMEOUT", 60)
    assert cluster.run_link(script, link, predecessor=100).returncode == 0
    [successor] = cluster.pending()
    cluster.finish(link, "TIMEOUT", 60)
    cluster.set_job(successor, state="NODE_FAIL", start="2026-11-30T01:01:00",
                    end="2026-11-30T01:01:00")
    thread = stale_view(run_dir, names, before)  # the journal of link 100, queueing `link`
    result = cluster.run_guard(successor)
    thread.join()
    assert result.returncode == 0, result.stderr
    assert "the chain continued with job" in result.stderr, result.stderr
    [replacement] = cluster.pending()
    record = json.loads(read(run_dir, rc.JOURNAL_FILE))
    assert (record["job"], record["successor"]) == (link, replacement)


@pytest.mark.parametrize("seed", [23196, 26389, 45695, 54029, 70654, 71985, 80985])
def test_history_a_link_with_neither_successor_nor_guard_is_adopted_by_the_guard_before_it(seed):
    # Found by the 100,000 histories with lagging views (0.7 before this fix): sbatch failed for
    # a link's successor and for its own guard (an outage), and the link ended within a second,
    # before its background step could try again; the guard of its predecessor, running then,
    # saw "the chain went on past" its job and did nothing: nothing continued the chain.
    histories.run_histories(1, seed, FAST_DIR)


@pytest.mark.parametrize("orphan_state, said", [
    ("RUNNING", "which had neither a successor nor a guard: queued its guard 900000"),
    ("TIMEOUT", "job 1000 ended TIMEOUT before it queued its successor; the chain continued "
                "with job 5000"),
    ("COMPLETED", "job 1000 COMPLETED: the work is done"),
], ids=["it still runs: it gets a guard", "it timed out: it gets its successor",
        "it completed: nothing to do"])
def test_the_guard_before_a_link_with_neither_successor_nor_guard_acts_as_that_links_guard(
        tmp_path, monkeypatch, orphan_state, said):
    # Link 1000's sbatch of its successor and of its guard failed (an outage): the guard of its
    # predecessor 100 is the only job left that can continue the chain once 1000 has ended.
    run_dir, _ = chain_at_its_second_link(tmp_path, monkeypatch, None)
    path = os.path.join(str(tmp_path), "cluster.json")
    fake_slurm.save(path, dict(fake_slurm.load(path), sbatch_error="busy"))
    rc.run_link(run_dir, rc.Settings(3, 3600), rc.NextLink(TRUE_SCRIPT, [], [], "job.sh"),
                {"SLURM_JOB_ID": "1000", "SLURM_JOB_DEPENDENCY": "afternotok:100"})
    record = rc.StateStore(run_dir).read_record()
    assert (record.job, record.successor, record.guarded_by) == ("1000", None, None)
    cluster = dict(fake_slurm.load(path), sbatch_error=None)
    cluster["jobs"]["1000"].update(state=orphan_state, end="2026-11-30T01:00:03")
    fake_slurm.save(path, cluster)
    clock = histories.OwnClock()
    _, _, words = rc.guard_chain(run_dir, "100", {"SLURM_JOB_ID": "1500"}, sleep=clock.sleep,
                                 clock=clock)
    assert said in words, words


def test_a_cancelled_chain_is_not_continued_by_the_guard_of_an_earlier_link(tmp_path,
                                                                            monkeypatch):
    # Found by review: link 1000 ended with neither successor nor guard (status: broken); the
    # guard of its predecessor 100, still running, would have adopted it after the cancel.
    run_dir, _ = chain_at_its_second_link(tmp_path, monkeypatch, None)
    path = os.path.join(str(tmp_path), "cluster.json")
    fake_slurm.save(path, dict(fake_slurm.load(path), sbatch_error="busy"))
    rc.run_link(run_dir, rc.Settings(3, 3600), rc.NextLink(TRUE_SCRIPT, [], [], "job.sh"),
                {"SLURM_JOB_ID": "1000", "SLURM_JOB_DEPENDENCY": "afternotok:100"})
    cluster = dict(fake_slurm.load(path), sbatch_error=None)
    cluster["jobs"]["1000"].update(state="TIMEOUT", end="2026-11-30T01:00:03")
    fake_slurm.save(path, cluster)
    assert rc.cancel_chain(run_dir).get("ended") is None  # marked, not "already broken"
    jobs = set(fake_slurm.load(path)["jobs"])
    clock = histories.OwnClock()
    _, _, words = rc.guard_chain(run_dir, "100", {"SLURM_JOB_ID": "1500"}, sleep=clock.sleep,
                                 clock=clock)
    assert words == "nothing to guard: the chain was cancelled"
    assert set(fake_slurm.load(path)["jobs"]) == jobs  # nothing queued



LINK = rc.Record(job="200", predecessor="100", action="resume", successor="300", guard="400")
FIRST = {"first_job": "100"}  # submit's record of a chain whose first job never ran


@pytest.mark.parametrize("record, submitted, job_id, cancelled, state, trusted, expected", [
    pytest.param(LINK, None, "300", "cancelled", None, True, "chain cancelled", id="cancelled"),
    pytest.param(LINK, None, "100", None, None, True, "went on", id="the chain went on"),
    pytest.param(LINK._replace(successor=None, guard=None), None, "100", None, None, True,
                 "orphan", id="it went on to a link with neither successor nor guard"),
    pytest.param(LINK, None, "999", None, None, True, "not named", id="not named"),
    pytest.param(LINK._replace(action="stop", successor=None), None, "200", None, None, True,
                 "decided", id="its link stopped the chain"),
    pytest.param(LINK, None, "200", None, None, True, "queued", id="its link queued"),
    pytest.param(LINK._replace(guard=None), None, "200", None, None, True, "uncovered",
                 id="its link's successor has no guard"),
    pytest.param(LINK, None, "300", None, "NODE_FAIL", True, "died", id="the successor died"),
    pytest.param(LINK, None, "300", None, "NODE_FAIL", False, "view lags",
                 id="the successor died, the view may lag"),
    pytest.param(LINK, None, "300", None, "CANCELLED", False, "cancelled unstarted",
                 id="the successor was cancelled before it started"),
    pytest.param(LINK, None, "300", None, "RUNNING", True, "not ended", id="it runs"),
    pytest.param(LINK, None, "300", None, "lost", True, "lost", id="nobody knows it"),
    pytest.param(LINK._replace(successor=None), None, "200", None, "TIMEOUT", True, "ran",
                 id="its link ended before it queued"),
    pytest.param(LINK._replace(source="resume", successor=None), None, "200", None, "NODE_FAIL",
                 True, "died", id="the link resume queued died before its prologue"),
    pytest.param(None, FIRST, "100", None, "TIMEOUT", True, "died", id="the first job died"),
    pytest.param(None, FIRST, "100", None, "lost", True, "first job lost",
                 id="nobody knows the first job"),
    pytest.param(None, FIRST, "100", None, "PENDING", True, "first job not ended",
                 id="the first job pends"),
])
def test_the_guard_chooses_its_situation_from_the_journal_and_how_its_job_ended(
        record, submitted, job_id, cancelled, state, trusted, expected):
    ran = record and record.source != "resume" and record.job  # the chain file's last job
    snapshot = rc.Snapshot(0, 0, ran or None, record, cancelled)
    situation = rc._guard_situation(snapshot, submitted, job_id)
    if situation == "ended":
        job = None if state == "lost" else rc.Job(job_id, state, nodes=None if state in (
            "CANCELLED", "PENDING") else "node1")
        situation = rc._guard_ending(snapshot, job, trusted)
    assert situation == expected and situation in rc.GUARD_SITUATIONS
