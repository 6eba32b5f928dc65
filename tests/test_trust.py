"""The trust model (docs/trust-model.md), tried as colleagues and an admin would: three local
users in one group on one machine, a group-shared parent directory, the real command line and
the in-job step against the fake Slurm.

Needs root (to create the users and to run as each of them; CI runs as root): otherwise the
module skips with a one-line reason. The users only exist on this machine.
"""
import grp
import json
import os
import pwd
import re
import resource
import shutil
import stat
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"  # the system's: other users cannot reach root's pyenv
GROUP, OWNER, MATE, PEER = "rctrust", "rcowner", "rcmate", "rcpeer"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(PYTHON, os.X_OK) or not shutil.which("useradd"),
    reason="trust tests need root, useradd and %s (to act as three local users)" % PYTHON)


def ensure_users():
    if subprocess.run(["getent", "group", GROUP], stdout=subprocess.DEVNULL).returncode:
        subprocess.run(["groupadd", GROUP], check=True)
    for user in (OWNER, MATE, PEER):
        if subprocess.run(["getent", "passwd", user], stdout=subprocess.DEVNULL).returncode:
            subprocess.run(["useradd", "-M", "-N", "-g", GROUP, "-s", "/bin/sh", user],
                           check=True)


class World(object):
    """Three users in one group, a shared runs/ directory, the module and the fake Slurm."""

    def __init__(self, top):
        self.top = top
        os.chmod(top, 0o755)
        self.tool = os.path.join(top, "tool")
        self.bin = os.path.join(top, "bin")
        self.cluster = os.path.join(top, "cluster")
        self.runs = os.path.join(top, "runs")
        self.secret = os.path.join(top, "root-only")
        for directory in (self.tool, self.bin):
            os.makedirs(directory, 0o755)
        os.makedirs(self.cluster)
        os.chmod(self.cluster, 0o777)  # the fake Slurm's own state: every user's commands
        os.makedirs(self.runs)
        os.chown(self.runs, 0, grp.getgrnam(GROUP).gr_gid)
        # A project directory: the group may create runs in it, and the sticky bit keeps each
        # member from renaming another's (docs/trust-model.md).
        os.chmod(self.runs, 0o3775)
        self.unsticky = os.path.join(top, "unsticky")  # the same without the sticky bit
        os.makedirs(self.unsticky)
        os.chown(self.unsticky, 0, grp.getgrnam(GROUP).gr_gid)
        os.chmod(self.unsticky, 0o2775)
        os.makedirs(self.secret, 0o700)
        for name in ("resumable_chain.py", os.path.join("tests", "fake_slurm.py")):
            shutil.copy(os.path.join(ROOT, name), self.tool)
        self.module = os.path.join(self.tool, "resumable_chain.py")
        for command in ("sbatch", "sacct", "scontrol", "squeue", "scancel"):
            path = os.path.join(self.bin, command)
            with open(path, "w") as handle:
                handle.write('#!/bin/sh\numask 000\nexec %s -I -S %s %s "$@"\n'
                             % (PYTHON, os.path.join(self.tool, "fake_slurm.py"), command))
            os.chmod(path, 0o755)
        self.state = os.path.join(self.cluster, "cluster.json")
        with open(self.state, "w") as handle:
            json.dump({"jobs": {}, "next_id": 1000}, handle)
        os.chmod(self.state, 0o666)
        self.homes = {}
        for user in (OWNER, MATE, PEER):
            home = os.path.join(top, "home-" + user)
            os.makedirs(home, 0o700)
            os.chown(home, pwd.getpwnam(user).pw_uid, grp.getgrnam(GROUP).gr_gid)
            self.homes[user] = home
        self.pwned = os.path.join(self.cluster, "pwned")

    def env(self, user, **extra):
        environ = {"PATH": self.bin + ":/usr/bin:/bin", "FAKE_SLURM_STATE": self.state,
                   "HOME": self.homes.get(user, "/root"), "LANG": "C.UTF-8",
                   "RESUMABLE_CHAIN_LOOKUP_SECONDS": "0", "RESUMABLE_CHAIN_VIEW_WAIT": "0",
                   "SECRET_TOKEN": "token-of-%s" % (user or "root")}
        environ.update({key: str(value) for key, value in extra.items()})
        return environ

    def run(self, user, argv, timeout=60, **extra):
        """Run argv as ``user`` (root: None) with umask 002, as on a group-shared project."""
        def become():
            os.umask(0o002)
            if user is not None:
                entry = pwd.getpwnam(user)
                os.setgroups([entry.pw_gid])
                os.setgid(entry.pw_gid)
                os.setuid(entry.pw_uid)
        return subprocess.run(argv, env=self.env(user, **extra), preexec_fn=become, cwd=self.top,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout)

    def cli(self, user, *argv, **extra):
        return self.run(user, [PYTHON, self.module] + list(argv), **extra)

    def jobs(self):
        with open(self.state) as handle:
            return json.load(handle)["jobs"]

    def sbatch_calls(self):
        path = self.state + ".calls"
        if not os.path.exists(path):
            return []
        with open(path) as handle:
            return [json.loads(line) for line in handle if '"sbatch"' in line]

    def script(self, name="job.sh"):
        """A plain batch script any user can read."""
        path = os.path.join(self.tool, name)
        with open(path, "w") as handle:
            handle.write("#!/bin/bash\n#SBATCH --time=10\necho work\n")
        os.chmod(path, 0o755)
        return path

    def as_job(self, user, script, job_id, predecessor=None):
        """Run a job script as Slurm would run it for ``user``."""
        environ = {"SLURM_JOB_ID": job_id, "SLURM_JOB_NAME": "job.sh",
                   "SLURM_CLUSTER_NAME": "local"}
        if predecessor:
            environ["SLURM_JOB_DEPENDENCY"] = "afternotok:%s" % predecessor
        self.set_job(job_id, state="RUNNING", start="2026-11-30T01:00:00",
                     uid=pwd.getpwnam(user).pw_uid)
        return self.run(user, ["/bin/bash", script], **environ)

    def set_job(self, job_id, **fields):
        with open(self.state) as handle:
            cluster = json.load(handle)
        job = cluster["jobs"].setdefault(job_id, {"state": "PENDING", "elapsed": 0,
                                                  "start": "Unknown", "end": "Unknown"})
        job.update(fields)
        with open(self.state, "w") as handle:
            json.dump(cluster, handle)


@pytest.fixture(scope="module")
def world():
    ensure_users()
    top = tempfile.mkdtemp(prefix="rc-trust-", dir="/tmp")
    try:
        yield World(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def tree(path):
    """{path: (mode, size, mtime)} of everything under path: what "nothing changed" compares."""
    found = {}
    for directory, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(directory, name)
            info = os.lstat(full)
            found[full] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


def mkdir_as(world, user, path, mode):
    assert world.run(user, ["/bin/sh", "-c", "mkdir -p %s && chmod %o %s" % (path, mode, path)]
                     ).returncode == 0


def plant(world, user, path, files):
    """Write ``files`` ({name: text, or a ("symlink", target) / ("fifo",) / ("sparse", size)})
    into path as ``user``."""
    mkdir_as(world, user, path, 0o775)
    entry = pwd.getpwnam(user)
    for name, content in files.items():
        full = os.path.join(path, name)
        if isinstance(content, tuple) and content[0] == "symlink":
            os.symlink(content[1], full)
        elif isinstance(content, tuple) and content[0] == "fifo":
            os.mkfifo(full, 0o666)
        elif isinstance(content, tuple) and content[0] == "sparse":
            with open(full, "wb") as handle:
                handle.truncate(content[1])
                handle.seek(content[1] - 20)
                handle.write(b"\n1000\n1001\n")
        else:
            with open(full, "w", encoding="utf-8", errors="surrogatepass") as handle:
                handle.write(content if isinstance(content, str) else json.dumps(content))
        os.lchown(full, entry.pw_uid, entry.pw_gid)
        if not os.path.islink(full):
            os.chmod(full, 0o666 if name.endswith(".lock") else 0o664)


# -- reading is not acting -----------------------------------------------------------------

def planted_chain(world, name, cancelled=True):
    """A group member's three-file "chain" whose notify command would run as whoever acts."""
    path = os.path.join(world.runs, name)
    files = {".resumable_chain.submit.json": {
        "first_job": "1", "notify": "id -un >> %s; env >> %s" % (world.pwned, world.pwned)},
        ".resumable_chain.lock": ""}
    if cancelled:
        files[".resumable_chain.cancelled"] = "2026-12-01T00:00:00\n"
    plant(world, MATE, path, files)
    return path


@pytest.mark.parametrize("who,argv", [
    ("a colleague's status of the parent", [PEER, "status", "{runs}"]),
    ("a colleague's status of the chain", [PEER, "status", "{chain}"]),
    ("root's status --check from cron", [None, "status", "--check", "{runs}"]),
    ("root's status --json", [None, "status", "--json", "{chain}"]),
    ("a colleague's cancel --dry-run", [PEER, "cancel", "--dry-run", "{chain}"]),
])
def test_looking_at_someone_elses_chain_runs_nothing_and_writes_nothing(world, who, argv):
    chain = planted_chain(world, "planted-" + who.split()[1].strip("'s") + str(len(argv)))
    before = tree(world.runs)
    user, words = argv[0], [word.format(runs=world.runs, chain=chain) for word in argv[1:]]
    result = world.cli(user, *words)
    assert "Traceback" not in result.stderr, result.stderr
    assert not os.path.exists(world.pwned), "a notify command ran as %s" % (user or "root")
    assert tree(world.runs) == before, "status wrote into a chain it only looked at"


@pytest.mark.parametrize("command", [["cancel"], ["resume"], ["cancel", "--dry-run"]],
                         ids=["cancel", "resume", "cancel --dry-run"])
def test_acting_on_someone_elses_chain_is_refused_in_one_line(world, command):
    chain = planted_chain(world, "planted-" + "-".join(command).strip("-"), cancelled=False)
    before, calls = tree(world.runs), len(world.sbatch_calls())
    result = world.cli(PEER, *command + [chain])
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "belongs to %s" % MATE in result.stderr and chain in result.stderr
    assert not os.path.exists(world.pwned)
    assert tree(world.runs) == before and len(world.sbatch_calls()) == calls


# -- only the owner acts, on a directory no one else can write -------------------------------

def submit_as_owner(world, name, notify):
    """The owner's submit of a chain in the shared runs/ with a notify command: (run dir, job)."""
    run_dir = os.path.join(world.runs, name)
    result = world.cli(OWNER, "submit", run_dir, "--notify", notify, "--", world.script())
    assert result.returncode == 0, result.stderr
    return run_dir, result.stdout.strip()


def test_the_owners_chain_works_end_to_end_in_a_group_shared_parent(world):
    notify = "echo \"$RESUMABLE_CHAIN_EVENT $(id -un)\" >> %s/notified" % world.homes[OWNER]
    run_dir, first = submit_as_owner(world, "mine", notify)
    info = os.stat(run_dir)
    assert info.st_uid == pwd.getpwnam(OWNER).pw_uid and not info.st_mode & 0o022, oct(
        info.st_mode)  # umask 002, yet the group cannot write it
    notify_file = os.path.join(run_dir, ".resumable_chain.notify")
    assert stat.S_IMODE(os.stat(notify_file).st_mode) == 0o600
    for name in (".resumable_chain.submit.json",):
        with open(os.path.join(run_dir, name)) as handle:
            assert "notified" not in handle.read()  # the command (maybe a token) is not public
    copy = os.path.join(run_dir, "resumable-job.sh")
    assert world.as_job(OWNER, copy, first).returncode == 0
    successor = max((job for job, fields in world.jobs().items()
                     if fields["state"] == "PENDING" and not fields.get("wrap")), key=int)
    world.set_job(first, state="COMPLETED", elapsed=5, end="2026-11-30T02:00:00")
    result = world.as_job(OWNER, copy, successor, predecessor=first)
    assert result.returncode == 0, result.stderr  # found its predecessor COMPLETED: done
    status = world.cli(PEER, "status", run_dir)  # a colleague may look
    assert status.returncode == 0 and "verdict: finished" in status.stdout, status.stdout
    with open(os.path.join(world.homes[OWNER], "notified")) as handle:
        assert handle.read() == "finished %s\n" % OWNER


@pytest.mark.parametrize("situation", [
    "a run directory another user created first",
    "the owner's own run directory, group-writable",
])
def test_a_run_directory_others_can_write_is_refused_before_anything_is_queued(world,
                                                                                situation):
    run_dir = os.path.join(world.runs, "guess-%d" % len(situation))
    if situation.startswith("a run directory another user"):
        mkdir_as(world, MATE, run_dir, 0o755)
        expected = "belongs to %s" % MATE
    else:
        mkdir_as(world, OWNER, run_dir, 0o775)
        expected = "lets its group write it"
    calls = len(world.sbatch_calls())
    for argv in (["submit", run_dir, "--", world.script()], ["render", run_dir]):
        result = world.cli(OWNER, *argv)
        assert result.returncode == 2 and expected in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and run_dir in result.stderr
    assert len(world.sbatch_calls()) == calls and os.listdir(run_dir) == []


@pytest.mark.parametrize("who", ["a first job", "a later link", "cancel", "resume"])
def test_a_chain_whose_directory_its_group_can_write_is_refused_by_every_writer(world, who):
    run_dir = os.path.join(world.runs, "job-in-shared-" + who.replace(" ", "-"))
    prologue = world.cli(OWNER, "render", run_dir, "--python", PYTHON)
    assert prologue.returncode == 0, prologue.stderr
    script = os.path.join(world.homes[OWNER], "job-%s.sh" % who.replace(" ", "-"))
    with open(script, "w") as handle:
        handle.write("#!/bin/bash\n" + prologue.stdout + "echo WORK RAN\n")
    os.chmod(script, 0o755)
    if who != "a first job":  # the chain ran a link while its directory was the owner's alone
        first = world.as_job(OWNER, script, "5%d" % len(who))
        assert first.returncode == 0 and "WORK RAN" in first.stdout, first.stderr
        world.set_job("5%d" % len(who), state="TIMEOUT", elapsed=60, end="2026-11-30T02:00:00")
    os.chmod(run_dir, 0o775)  # e.g. chmod -R g+w by a well-meaning colleague (or the owner)
    before, calls = tree(run_dir), len(world.sbatch_calls())
    if who in ("cancel", "resume"):
        result = world.cli(OWNER, who, run_dir)
    else:
        result = world.as_job(OWNER, script, "6%d" % len(who),
                              predecessor="5%d" % len(who) if who != "a first job" else None)
    assert result.returncode == 2 and "WORK RAN" not in result.stdout, result.stderr
    assert "mode 0775" in result.stderr and run_dir in result.stderr
    assert len(world.sbatch_calls()) == calls and tree(run_dir) == before


def test_a_job_id_in_the_owners_journal_never_cancels_another_users_job(world):
    other = "777"
    world.set_job(other, state="RUNNING", uid=pwd.getpwnam(PEER).pw_uid)
    run_dir = os.path.join(world.top, "root-chain")
    os.makedirs(run_dir, 0o755)
    with open(os.path.join(run_dir, ".gym_job_chain"), "w") as handle:
        handle.write("100\n")
    with open(os.path.join(run_dir, ".resumable_chain.json"), "w") as handle:
        json.dump({"job": "100", "action": "resume", "successor": other, "guard": other,
                   "phase": "done", "walltime": 0, "retries": 0}, handle)
    result = world.cli(None, "cancel", run_dir)  # root: Slurm would let it cancel anything
    assert "Traceback" not in result.stderr
    assert world.jobs()[other]["state"] == "RUNNING"
    for user in (OWNER,):  # a user's scancel of another's job: Slurm refuses, as the fake does
        assert world.run(user, ["scancel", other]).returncode == 1
    assert world.jobs()[other]["state"] == "RUNNING"


# -- nothing through a symlink, never a hang on a FIFO -----------------------------------------

@pytest.mark.parametrize("planted", [
    "the lock file is a symlink into a root-only directory",
    "the lock file is a symlink to the owner's other chain's cancel mark",
    "the lock file is a FIFO",
    "the journal is a FIFO",
])
def test_planted_files_are_refused_not_followed(world, planted):
    other = os.path.join(world.top, "other-chain-%d" % len(planted))
    os.makedirs(other, 0o755)
    run_dir = os.path.join(world.top, "victim-%d" % len(planted))
    os.makedirs(run_dir, 0o755)
    with open(os.path.join(run_dir, ".gym_job_chain"), "w") as handle:
        handle.write("100\n")
    lock = os.path.join(run_dir, ".resumable_chain.lock")
    target = {"root-only": os.path.join(world.secret, "created"),
              "other chain": os.path.join(other, ".resumable_chain.cancelled")}
    if "root-only" in planted:
        os.symlink(target["root-only"], lock)
    elif "other chain" in planted:
        os.symlink(target["other chain"], lock)
    elif "lock file is a FIFO" in planted:
        os.mkfifo(lock)
    else:
        os.mkfifo(os.path.join(run_dir, ".resumable_chain.json"))
    for argv in (["status", "--check", run_dir], ["cancel", run_dir], ["resume", run_dir]):
        result = world.cli(None, *argv, timeout=30)  # a hang fails here
        assert "Traceback" not in result.stderr, (argv, result.stderr)
    assert not any(os.path.exists(path) for path in target.values())
    assert os.listdir(other) == []


def the_module(world):
    """The module as copied for the users, imported here (for what only its parts show)."""
    import sys
    sys.path.insert(0, world.tool)
    try:
        import resumable_chain as rc
    finally:
        sys.path.remove(world.tool)
    return rc


def test_state_writes_never_follow_a_symlink_planted_for_a_coming_temp_name(world):
    rc = the_module(world)
    run_dir = tempfile.mkdtemp(dir=world.top)
    victim = os.path.join(world.top, "victim-file")
    with open(victim, "w") as handle:
        handle.write("precious\n")
    for pid in range(os.getpid(), os.getpid() + 50):  # what 0.5's names were: <file>.tmp.<pid>
        os.symlink(victim, os.path.join(run_dir, ".gym_infra_retries.tmp.%d" % pid))
    store = rc.StateStore(run_dir)
    with store.locked():
        store.write_text(rc.RETRIES_FILE, "3\n")
    with open(victim) as handle:
        assert handle.read() == "precious\n"
    assert store.read_counter(rc.RETRIES_FILE) == 3


# -- nobody can swap the run directory between two steps --------------------------------------

@pytest.mark.parametrize("situation", [
    "the parent lets the group rename entries (no sticky bit)",
    "a group member's symlink stands for a directory on the path",
    "a group member's symlink is the run directory, named with a trailing slash",
    "the owner's own parent, made group-writable by a umask of 002",
])
def test_a_run_directory_someone_else_could_swap_is_refused(world, situation):
    # The review's attack: between two steps of submit (or of a link) a group member renames
    # the run directory away and puts hers in its place, so that sbatch reads her script.
    def chain_of_the_owner(path):
        assert world.run(OWNER, ["/bin/sh", "-c", "mkdir -m 755 %s && echo 5 > %s/.gym_job_chain"
                                 % (path, path)]).returncode == 0
    mine = os.path.join(world.homes[OWNER], "private-%d" % len(situation))
    chain_of_the_owner(mine)  # a chain of the owner's, elsewhere
    if situation.startswith("the parent"):
        run_dir = os.path.join(world.unsticky, "a")
        chain_of_the_owner(run_dir)
        expected = "lets others rename what is in it (no sticky bit)"
    elif "umask" in situation:
        parent = os.path.join(world.homes[OWNER], "runs-002")
        mkdir_as(world, OWNER, parent, 0o775)
        run_dir = os.path.join(parent, "a")
        chain_of_the_owner(run_dir)
        expected = "run chmod +t %s (or chmod go-w %s)" % (parent, parent)  # not "ask its owner"
    elif "on the path" in situation:
        link = os.path.join(world.runs, "proj-%s" % MATE)
        assert world.run(MATE, ["ln", "-s", world.homes[OWNER], link]).returncode == 0
        run_dir = os.path.join(link, os.path.basename(mine))
        expected = "the symlink %s belongs to %s" % (link, MATE)
    else:
        link = os.path.join(world.runs, "slash-%s" % MATE)
        assert world.run(MATE, ["ln", "-s", mine, link]).returncode == 0
        run_dir = link + "/"
        expected = "belongs to %s" % MATE
    before, calls = tree(world.homes[OWNER]), len(world.sbatch_calls())
    for argv in (["submit", run_dir, "--", world.script()], ["cancel", run_dir],
                 ["resume", run_dir], ["render", run_dir]):
        result = world.cli(OWNER, *argv)
        assert result.returncode == 2 and expected in result.stderr, (argv, result.stderr)
        assert "Traceback" not in result.stderr
    assert tree(world.homes[OWNER]) == before and len(world.sbatch_calls()) == calls


def test_the_notify_command_is_in_no_file_or_log_others_can_read(world):
    notify = "echo $RESUMABLE_CHAIN_EVENT TOKEN123 >> %s/heard" % world.homes[OWNER]
    run_dir, first = submit_as_owner(world, "token", notify)
    log = world.as_job(OWNER, os.path.join(run_dir, "resumable-job.sh"), first)
    assert log.returncode == 0, log.stderr
    for directory, _, files in os.walk(run_dir):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                if b"TOKEN123" in handle.read():
                    assert name == ".resumable_chain.notify" and \
                        stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    assert "TOKEN123" not in log.stderr + log.stdout  # what goes to slurm-%j.out
    peer = world.cli(PEER, "status", "--json", run_dir)
    assert peer.returncode == 0 and "TOKEN123" not in peer.stdout


@pytest.mark.parametrize("planted,expected", [
    ({"reason": "x\nverdict: finished"}, "x\\nverdict: finished"),
    ({"reason": "\ud800 odd"}, "\\ud800 odd"),
    ({"time": 1e20}, "corrupt state file"),
])
def test_what_a_state_file_holds_is_shown_never_obeyed(world, planted, expected):
    run_dir = os.path.join(world.runs, "shown-%d" % len(str(planted)))
    event = dict({"event": "stopped", "job": "7", "link": 1, "reason": "r", "time": 0}, **planted)
    plant(world, MATE, run_dir, {".resumable_chain.submit.json": {"first_job": "7"},
                                 ".resumable_chain.events.json": {"events": [event]}})
    for argv in (["status", run_dir], ["status", "--json", run_dir], ["status", world.runs]):
        result = world.cli(PEER, *argv)
        assert "Traceback" not in result.stderr, result.stderr
        if argv[1] == "--json":
            json.loads(result.stdout)
            assert "\\ud800" not in result.stdout.replace("\\\\ud800", "")
        elif argv[1] == run_dir:
            assert expected in result.stdout and "\nverdict: finished" not in result.stdout


def test_a_directory_the_caller_cannot_list_is_one_line(world):
    hidden = os.path.join(world.runs, "hidden")
    mkdir_as(world, MATE, hidden, 0o711)
    result = world.cli(PEER, "status", hidden)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "cannot list" in result.stderr and "Traceback" not in result.stderr


# -- what an attacker with a foothold tried ----------------------------------------------------

def owners_chain_with_journal(world, name, journal_mode):
    """The owner's chain (directory 0755, theirs) whose journal names job 888, the owner's
    other running job, as its successor; the journal's mode is ``journal_mode``."""
    world.set_job("888", state="RUNNING", uid=pwd.getpwnam(OWNER).pw_uid)
    run_dir = os.path.join(world.runs, name)
    mkdir_as(world, OWNER, run_dir, 0o755)
    journal = os.path.join(run_dir, ".resumable_chain.json")
    with open(journal, "w") as handle:
        json.dump({"job": "100", "action": "resume", "successor": "888", "phase": "queued",
                   "walltime": 0, "retries": 0}, handle)
    entry = pwd.getpwnam(OWNER)
    os.chown(journal, entry.pw_uid, entry.pw_gid)
    os.chmod(journal, journal_mode)
    return run_dir


@pytest.mark.parametrize("command", [["cancel"], ["submit", "--force"], ["cancel", "--dry-run"]])
def test_a_journal_its_group_can_write_is_refused_before_any_job_is_cancelled(world, command):
    """Anyone in the group could have written the job IDs in it: cancel, and submit --force
    (which cancels the chain it replaces), refuse before any scancel; the dry run refuses as
    the cancel it previews would."""
    run_dir = owners_chain_with_journal(world, "planted-ids-" + "".join(command), 0o664)
    argv = command[:1] + [run_dir] + command[1:] + (
        ["--", world.script()] if command[0] == "submit" else [])
    before = set(world.jobs())
    result = world.cli(OWNER, *argv)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "group" in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert world.jobs()["888"]["state"] == "RUNNING"
    left = {job: fields["state"] for job, fields in world.jobs().items() if job not in before}
    assert "PENDING" not in left.values(), left  # submit's new first job and its guard too


@pytest.mark.parametrize("name, owner, mode, problem", [
    (".gym_infra_retries", "root", 0o644, "it belongs to root"),
    (".resumable_chain.json", OWNER, 0o664, "lets its group write it"),
], ids=["a counter someone else put there", "a journal the group can write"])
def test_the_owners_status_refuses_a_state_file_as_the_owners_resume_would(
        world, name, owner, mode, problem):
    """status of one's own chain read such a file and said resume continues the chain, which
    then refused it; an admin's status of the owner's chain still reads the owner's files."""
    run_dir = owners_chain_with_journal(world, "foreign-" + name.strip("."), 0o644)
    path = os.path.join(run_dir, name)
    if not os.path.exists(path):  # the journal is there already
        with open(path, "w") as handle:
            handle.write("1\n")
    os.chown(path, pwd.getpwnam(owner).pw_uid, -1)
    os.chmod(path, mode)
    assert world.run(OWNER, ["/bin/sh", "-c", "umask 022; echo 100 > %s/.gym_job_chain" % run_dir]
                     ).returncode == 0  # a chain with a link: the verdict is drawn, the file named
    world.set_job("100", state="FAILED", exit_code="1:0")
    shown = world.cli(OWNER, "status", run_dir)
    assert "refusing to act on state file %s: " % path in shown.stdout, shown.stdout
    assert problem in shown.stdout and "\nnext: fix the " in shown.stdout, shown.stdout
    resumed = world.cli(OWNER, "resume", run_dir)
    assert resumed.returncode == 2 and path in resumed.stderr and problem in resumed.stderr
    assert "refusing" not in world.cli(None, "status", run_dir).stdout


@pytest.mark.parametrize("viewer", [MATE, None], ids=["a colleague", "root"])
def test_a_next_step_for_someone_elses_chain_says_it_is_its_owners(world, viewer):
    """status of a colleague's chain said 'next: ... resume DIR continues it', which then
    refused the viewer (new-user trial)."""
    run_dir = owners_chain_with_journal(world, "next-of-%s" % (viewer or "root"), 0o644)
    assert world.run(OWNER, ["/bin/sh", "-c", "umask 022; echo 100 > %s/.gym_job_chain" % run_dir]
                     ).returncode == 0
    world.set_job("100", state="TIMEOUT", end="2026-11-30T01:00:00")
    world.set_job("888", state="FAILED", exit_code="1:0", end="2026-11-30T02:00:00")
    shown = world.cli(viewer, "status", run_dir)
    assert "\nnext: for its owner (%s): " % OWNER in shown.stdout, shown.stdout
    assert "\nnext: for its owner" not in world.cli(OWNER, "status", run_dir).stdout


@pytest.mark.parametrize("left", ["no lock file yet", "a lock file left 0644"])
def test_the_lock_file_is_its_owners_alone_so_no_reader_can_stall_the_chain(world, left):
    """A reader could hold a shared lockf on a lock file it may open, for ever, and so stop
    every writer: the lock file the owner's command creates is 0600, one left 0644 (by 0.4) is
    made so by its next use."""
    run_dir = owners_chain_with_journal(world, "lock-mode-%d" % len(left), 0o644)
    lock = os.path.join(run_dir, ".resumable_chain.lock")
    if left != "no lock file yet":
        assert world.run(OWNER, ["/bin/sh", "-c", "touch %s && chmod 644 %s" % (lock, lock)]
                         ).returncode == 0
    result = world.cli(OWNER, "cancel", run_dir)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600



def test_status_of_a_parent_skips_directories_below_it_the_caller_cannot_list(world):
    """A shared tree holds colleagues' 0700 directories and lost+found: a colleague's status of
    the parent shows the chains it can read, never fails for the others."""
    os.makedirs(os.path.join(world.runs, "lost+found"), 0o700, exist_ok=True)
    planted_chain(world, "readable-in-a-mixed-tree")
    result = world.cli(PEER, "status", world.runs)
    assert result.returncode in (0, 1) and "cannot list" not in result.stderr, result.stderr
    assert "readable-in-a-mixed-tree" in result.stdout


def test_a_chain_file_planted_in_a_shared_parent_neither_blocks_submits_nor_hides_chains(world):
    """Attack trial: a colleague's one-line .gym_job_chain in a shared project directory refused
    every submit below it ("inside the chain in ..."), and root's status --check of it showed
    that "chain" alone, with the advice to chmod go-w the shared directory."""
    top = os.path.join(world.runs, "projects")  # root's, below the shared runs/
    shared = os.path.join(top, "open-project")
    os.makedirs(shared)
    os.chmod(top, 0o755)
    os.chown(shared, 0, grp.getgrnam(GROUP).gr_gid)
    os.chmod(shared, 0o3775)  # as runs/: the group creates runs in it
    assert world.run(MATE, ["/bin/sh", "-c", "echo 1 > %s/.gym_job_chain" % shared]
                     ).returncode == 0
    result = world.cli(OWNER, "submit", os.path.join(shared, "mine"), "--", world.script())
    assert result.returncode == 0, result.stderr
    for looked_at in (shared, top):
        result = world.cli(None, "status", "--check", looked_at)
        rows = [line.split()[0] for line in result.stdout.splitlines()[1:] if line.strip()]
        assert [row.split("projects/")[-1] for row in rows[:2]] == [
            "open-project", "open-project/mine"], (looked_at, result.stdout)
        assert "chmod go-w" not in result.stdout and "shared directory" in result.stdout


def owners_submitted_chain(world, name):
    """The owner's submitted chain whose first job ran its work, then timed out, and nothing of
    it is queued any more: what ``resume`` is for."""
    run_dir = os.path.join(world.runs, name)
    result = world.cli(OWNER, "submit", run_dir, "--", world.script())
    assert result.returncode == 0, result.stderr
    job = result.stdout.strip()
    result = world.as_job(OWNER, os.path.join(run_dir, "resumable-job.sh"), job)
    assert result.returncode == 0, result.stderr
    world.set_job(job, state="TIMEOUT", elapsed=60, end="2026-11-30T02:00:00")
    for other, fields in world.jobs().items():
        if fields["state"] in ("PENDING", "RUNNING") and fields.get("uid") in (
                None, pwd.getpwnam(OWNER).pw_uid):
            world.set_job(other, state="CANCELLED", end="2026-11-30T02:00:00")
    return run_dir


def edit_as_owner(path, change):
    with open(path) as handle:
        data = json.load(handle)
    change(data)
    with open(path, "w") as handle:
        json.dump(data, handle)  # json writes a NUL as \u0000: a value no command line can hold


@pytest.mark.parametrize("file_name,field,value", [
    (".resumable_chain.submit.json", "python", "/usr/bin\u0000x"),
    (".resumable_chain.submit.json", "workdir", "/usr/bin\u0000x"),
    (".resumable_chain.json", "cluster", "/usr/bin\u0000x"),
    (".resumable_chain.json", "budget_dir", "/usr/bin\u0000x"),
    # attack trial: what -M would read as an option, or as two clusters
    (".resumable_chain.json", "cluster", "-oJobID"),
    (".resumable_chain.submit.json", "cluster", "local,other"),
    # attack trial: a relative path, which every reader would resolve from its own cwd
    (".resumable_chain.json", "budget_dir", "relative/budget"),
    (".resumable_chain.submit.json", "budget_dir", "relative/budget"),
])
def test_a_state_value_no_command_line_can_hold_is_refused_before_anything_is_queued(
        world, file_name, field, value):
    """A NUL in a path, an interpreter or a cluster name from a state file: a corrupt file named
    in one line, as the same value on the command line would be, and no held job left behind."""
    run_dir = owners_submitted_chain(world, "bad-%s-%d-%s" % (field, len(value), file_name[17:21]))
    edit_as_owner(os.path.join(run_dir, file_name), lambda data: data.__setitem__(field, value))
    before = set(world.jobs())
    result = world.cli(OWNER, "resume", run_dir)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert file_name in result.stderr and "corrupt" in result.stderr, result.stderr
    assert set(world.jobs()) == before


@pytest.mark.parametrize("file_name", [".resumable_chain.submit.json", ".resumable_chain.json"])
def test_a_planted_chain_naming_a_cluster_no_command_can_ask_is_one_unknown_row(world,
                                                                                   file_name):
    """A colleague's chain whose cluster name holds a NUL: the admin's table of the parent still
    shows every other chain; the planted one is an unknown row that --check counts."""
    good = owners_submitted_chain(world, "beside-a-planted-cluster-" + file_name[-9:-5])
    bad = os.path.join(world.runs, "zz-planted-cluster-" + file_name[-9:-5])
    files = {".resumable_chain.submit.json": {"first_job": "7"}, ".gym_job_chain": "7\n"}
    files[file_name] = dict(files.get(file_name) or {"job": "7", "action": "resume",
                                                      "walltime": 0, "retries": 0},
                            cluster="x\u0000y")
    plant(world, MATE, bad, files)
    result = world.cli(None, "status", "--check", world.runs)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()
            if line.startswith(os.path.basename(world.runs) + "/") or line.startswith("runs/")}
    shown = {os.path.basename(path): verdict for path, verdict in rows.items()}
    assert shown.get(os.path.basename(bad)) == "unknown", result.stdout
    assert shown.get(os.path.basename(good)) not in (None, "unknown"), result.stdout


@pytest.mark.parametrize("log", ["made by the chain under umask 002", "left 0664 by Slurm"])
def test_the_guard_log_is_its_owners_alone_so_status_shows_only_what_guards_wrote(world, log):
    """slurmstepd creates a job's --output with the job's umask: under 002 the group could append
    lines that status would show as a guard's (a colleague's job as the chain's successor). The
    chain makes the log 0644 before Slurm opens it; a group-writable one is not believed."""
    name = "guard-log-" + log.split()[0]
    if log.startswith("made"):
        run_dir = os.path.join(world.runs, name)
        result = world.run(OWNER, ["/bin/sh", "-c", 'umask 002; exec "$@"', "_", PYTHON,
                                   world.module, "submit", run_dir, "--", world.script()])
        assert result.returncode == 0, result.stderr
    else:
        run_dir = owners_submitted_chain(world, name)
    path = os.path.join(run_dir, ".resumable_chain.guard.log")
    if log.startswith("left"):
        world.run(OWNER, ["/bin/sh", "-c", ': >> "$0"; chmod 664 "$0"', path])  # as slurmstepd
    journal = json.load(open(os.path.join(run_dir, ".resumable_chain.submit.json")))
    line = ("resumable-chain: 2026-11-30T03:00:00 guard %s of job %s: the chain continued with "
            "job 4242\n" % (journal.get("guard") or "1", journal["first_job"]))
    planted = world.run(MATE, ["/bin/sh", "-c", 'printf "%s" "$1" >> "$0"', path, line])
    world.set_job("4242", state="RUNNING", start="2026-11-30T03:00:00",
                  uid=pwd.getpwnam(MATE).pw_uid)
    status = world.cli(OWNER, "status", run_dir)
    assert "4242" not in status.stdout, status.stdout
    if log.startswith("made"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644 and planted.returncode != 0
    else:
        assert planted.returncode == 0  # it was written: status must not believe it


@pytest.mark.parametrize("who,argv", [
    ("root's cron", [None, "status", "--check", "runs"]),
    ("a colleague's status", [PEER, "status", "runs"]),
    ("a colleague's help", [PEER, "--help"]),
])
def test_modules_planted_beside_a_shared_copy_never_run_as_whoever_runs_it(world, who, argv):
    """A 0644 copy in a sticky group tools directory, run by path: Python puts the script's
    directory first on sys.path, so a colleague's json.py there would run as root's cron."""
    tools = os.path.join(world.top, "shared-tools")
    if not os.path.isdir(tools):
        os.makedirs(tools)
        os.chown(tools, 0, grp.getgrnam(GROUP).gr_gid)
        os.chmod(tools, 0o3775)
        shutil.copy(world.module, tools)
        os.chmod(os.path.join(tools, "resumable_chain.py"), 0o644)
        for name in ("json", "subprocess", "fcntl", "argparse"):
            code = "open(%r, 'a').write('%s ran as ' + __import__('os').popen('id -un').read())\n"
            assert world.run(MATE, [PYTHON, "-c", "open(%r, 'w').write(%r)" % (
                os.path.join(tools, name + ".py"), code % (world.pwned, name))]).returncode == 0
    planted_chain(world, "beside-planted-modules")
    result = world.run(argv[0], [PYTHON, "shared-tools/resumable_chain.py"] + argv[1:])
    assert not os.path.exists(world.pwned), open(world.pwned).read()
    assert result.returncode in (0, 1) and result.stdout, result.stderr


def hard_linked_chains(world, parent, count):
    """``count`` chains of a colleague's, each five MiB-sized state files, hard links of one set
    (no space used): as costly to read as a state file may be."""
    mib, first = 1 << 20, os.path.join(parent, "0")
    words = {"sbatch_args": ["--comment=x"] * 60000}
    plant(world, MATE, first, {
        ".gym_job_chain": "".join("%d\n" % (1000000 + i) for i in range(mib // 8 + 1)),
        ".resumable_chain.json": dict(words, job="7", action="resume", walltime=0, retries=0,
                                      next=dict(words, script="/x")),
        ".resumable_chain.submit.json": dict(words, first_job="7"),
        ".resumable_chain.events.json": {"events": [
            {"event": "resumed", "job": "7", "link": 1, "reason": "r", "time": 1}] * 14000},
        ".resumable_chain.guard.log": "".join(
            "resumable-chain: 2026-11-30T03:00:00 guard %d of job %d: the chain continued with "
            "job %d\n" % (2000000 + i, 3000000 + i, 4000000 + i) for i in range(12000))})
    for index in range(1, count):
        mkdir_as(world, MATE, os.path.join(parent, str(index)), 0o755)
        for name in os.listdir(first):
            os.link(os.path.join(first, name), os.path.join(parent, str(index), name))


def test_hundreds_of_planted_chains_never_blind_roots_check_of_the_owners_chain(world):
    """A colleague's 60 hard-linked chains of MiB files beside the owner's real chain: root's
    status --check reads the owner's first, keeps O(rows) of each chain and stops at its byte
    bound (before: 2.5 s and 28 MB each; past 60 s the real chain read 'not read')."""
    parent = os.path.join(world.top, "crowded")
    mkdir_as(world, None, parent, 0o3775)
    os.chown(parent, 0, grp.getgrnam(GROUP).gr_gid)
    hard_linked_chains(world, parent, 60)
    real = os.path.join(parent, "zz-real")
    result = world.cli(OWNER, "submit", real, "--", world.script())
    assert result.returncode == 0, result.stderr
    world.set_job(result.stdout.strip(), state="RUNNING", start="2026-11-30T01:00:00",
                  uid=pwd.getpwnam(OWNER).pw_uid)
    result = world.cli(None, "status", "--check", parent)
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert " running " in rows["crowded/zz-real"], result.stdout
    assert 0 < result.stdout.count("not read: status ran out of") < 60, result.stdout
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 400 << 10  # KiB: < 400 MB


# -- the second attacker's round (issue 41) ----------------------------------------------------

def planted_while_open(world, run_dir, planted):
    """The run directory was open to the group for a while (chmod g+w, an older release under
    umask 002): a colleague changed the script copy the links queue; then the owner ran chmod
    go-w as the refusal said. Returns the copy's path."""
    copy = os.path.join(run_dir, "resumable-job.sh")
    os.chmod(run_dir, 0o775)
    if planted.startswith("a colleague's"):
        words = 'rm -f "$0" && printf "#!/bin/sh\\nid -un >> %s\\n" > "$0" && chmod 755 "$0"'
    else:
        assert world.run(OWNER, ["chmod", "g+w", copy]).returncode == 0
        words = 'printf "id -un >> %s\\n" >> "$0"'
    assert world.run(MATE, ["/bin/sh", "-c", words % world.pwned, copy]).returncode == 0
    assert world.run(OWNER, ["chmod", "go-w", run_dir]).returncode == 0
    return copy


@pytest.mark.parametrize("planted,expected", [
    ("a colleague's script in the copy's place", "belongs to %s (uid" % MATE),
    ("the owner's copy, made group-writable", "lets its group write it, so anyone there could "
     "act as you; if you trust what is in it, run: chmod go-w"),
])
@pytest.mark.parametrize("who", ["a later link", "resume"])
def test_a_script_copy_planted_while_the_directory_was_open_is_never_queued(world, planted,
                                                                            expected, who):
    run_dir = owners_submitted_chain(world, "planted-copy-%s-%d" % (who[-4:], len(planted)))
    journal = json.load(open(os.path.join(run_dir, ".resumable_chain.json")))
    spool = os.path.join(world.homes[OWNER], "spool-%s-%d.sh" % (who[-4:], len(planted)))
    shutil.copy(os.path.join(run_dir, "resumable-job.sh"), spool)  # Slurm's copy of a link
    os.chmod(spool, 0o755)
    copy = planted_while_open(world, run_dir, planted)
    calls = len(world.sbatch_calls())
    if who == "resume":
        result = world.cli(OWNER, "resume", run_dir)
    else:
        result = world.as_job(OWNER, spool, journal["successor"], predecessor=journal["job"])
    assert result.returncode == 2 and "WORK RAN" not in result.stdout, result.stderr
    assert expected in result.stderr and copy in result.stderr, result.stderr
    assert "delete it" in result.stderr or "chmod go-w" in result.stderr
    assert "Traceback" not in result.stderr
    assert not any(copy in call["argv"] for call in world.sbatch_calls()[calls:])
    assert not os.path.exists(world.pwned)


@pytest.mark.parametrize("command", ["submit", "resume", "a rendered chain's first job"])
def test_a_log_planted_while_the_directory_was_open_is_refused_before_anything_is_queued(
        world, command):
    """An attacker's trial on 24.11: while the directory was open, a colleague left symlinks
    named after coming job IDs (slurm-<id>.out, the links' logs) to a file of the owner's; Slurm
    opened each link's log through one as the owner, emptied that file and wrote the log there
    (or, to a file of hers, let her read it)."""
    run_dir = owners_submitted_chain(world, "planted-log-%s" % command.split()[-1])
    notes = os.path.join(world.homes[OWNER], "notes-%s.txt" % command.split()[-1])
    assert world.run(OWNER, ["/bin/sh", "-c", 'echo keep me > "$0"', notes]).returncode == 0
    os.chmod(run_dir, 0o775)
    link = os.path.join(run_dir, "slurm-4242.out")
    assert world.run(MATE, ["ln", "-s", notes, link]).returncode == 0
    assert world.run(OWNER, ["chmod", "go-w", run_dir]).returncode == 0
    calls = len(world.sbatch_calls())
    if command == "submit":
        result = world.cli(OWNER, "submit", run_dir, "--force", "--", world.script())
    elif command == "resume":
        result = world.cli(OWNER, "resume", run_dir)
    else:  # render, the chain's files gone (a new chain there), then the pasted prologue's job
        rendered = os.path.join(world.homes[OWNER], "rendered-job.sh")
        prologue = world.cli(OWNER, "render", run_dir, "--python", PYTHON).stdout
        with open(rendered, "w") as handle:
            handle.write("#!/bin/bash\n#SBATCH --time=10\n" + prologue + "echo WORK RAN\n")
        os.chmod(rendered, 0o755)
        for name in os.listdir(run_dir):
            if name.startswith(".resumable_chain") or name.startswith(".gym_"):
                os.unlink(os.path.join(run_dir, name))
        result = world.as_job(OWNER, rendered, "4300")
        assert "WORK RAN" not in result.stdout
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "symlink %s: it belongs to %s (uid" % (link, MATE) in result.stderr, result.stderr
    assert "read it, then delete it" in result.stderr
    assert world.sbatch_calls()[calls:] == []
    with open(notes) as handle:
        assert handle.read() == "keep me\n"


@pytest.mark.parametrize("left, name, refused", [
    ("a colleague's 0644 file (a container's output)", "result.h5", False),
    ("a colleague's 0644 file where a link's log goes", "slurm-4400.out", True),  # later 0666
    ("a colleague's 0666 file", "data.csv", True),
    ("a colleague's directory", "cache", False),
    ("a colleague's directory where a link's log goes", "slurm-4400.out", True),  # fails links
    ("a colleague's guard log", ".resumable_chain.guard.log", True),  # no guard could start
    ("a colleague's 0644 file of a log's ending", "results.out", False),
    ("a colleague's directory of a log's beginning", "slurm-configs", False),
])
def test_what_others_left_in_the_run_directory_is_refused_only_where_a_log_could_go_through_it(
        world, left, name, refused):
    """An attacker's trial on 26.05: a colleague's 0644 slurm-<id>.out, made 0666 after the check,
    received the owner's log; her directories of those names failed each link (FAILED 0:53)."""
    run_dir = owners_submitted_chain(world, "left-" + "".join(word[0] for word in left.split()))
    path = os.path.join(run_dir, name)
    if "directory" in left:
        os.mkdir(path)
    else:
        if os.path.exists(path):
            os.unlink(path)
        with open(path, "w") as handle:
            handle.write("theirs\n")
        os.chmod(path, 0o666 if "0666" in left else 0o644)
    os.chown(path, pwd.getpwnam(MATE).pw_uid, -1)
    result = world.cli(OWNER, "resume", run_dir)
    assert (result.returncode == 2 and "%s %s: it belongs to %s" % (
        "directory entry" if "directory" in left else "file", path, MATE) in result.stderr) \
        is refused, result.stderr
    assert ("rename it, mv" in result.stderr) is (refused and "directory" in left)  # not rm


@pytest.mark.parametrize("logs", [
    "a colleague's directory, planted while the run directory was open",
    "the owner's, writable by the group (mkdir -p under umask 002)",
    "the owner's, closed, with a colleague's symlink in it",
])
def test_a_log_directory_inside_the_run_directory_is_checked_as_the_run_directory(world, logs):
    """An attacker's trial on 26.05: with --output=logs/%j.out, symlinks a colleague put in logs/
    (hers, or the owner's that her group could write) made Slurm write each link's log, as the
    owner, into a file of the owner's."""
    run_dir = os.path.join(world.runs, "logs-%d" % len(logs))
    folder, notes = os.path.join(run_dir, "logs"), os.path.join(world.homes[OWNER], "notes.txt")
    mkdir_as(world, OWNER, run_dir, 0o775 if "colleague's directory" in logs else 0o755)
    if "colleague's directory" in logs:
        mkdir_as(world, MATE, folder, 0o777)
        assert world.run(OWNER, ["chmod", "go-w", run_dir]).returncode == 0
    else:
        mkdir_as(world, OWNER, folder, 0o775 if "group" in logs else 0o777)
    if "symlink" in logs:
        assert world.run(MATE, ["ln", "-s", notes, os.path.join(folder, "4242.out")]
                         ).returncode == 0
        assert world.run(OWNER, ["chmod", "go-w", folder]).returncode == 0
    result = world.cli(OWNER, "submit", run_dir, "--output=logs/%j.out", "--", world.script())
    expected = {"colleague's directory": "log directory %s: it belongs to %s" % (folder, MATE),
                "group": "log directory %s: mode 2775 lets its group write it" % folder,  # setgid
                "symlink": "symlink %s/4242.out: it belongs to %s" % (folder, MATE)}
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert [words for key, words in expected.items() if key in logs][0] in result.stderr, \
        result.stderr
    assert world.sbatch_calls() == [] or all(
        run_dir not in " ".join(call["argv"]) for call in world.sbatch_calls())


def test_submit_into_a_colleagues_directory_says_whose_it_is_not_to_delete_their_files(world):
    """The review: the new check named a colleague's file in her own directory: 'delete it'."""
    theirs = os.path.join(world.runs, "colleagues")
    mkdir_as(world, MATE, theirs, 0o755)
    assert world.run(MATE, ["/bin/sh", "-c", 'echo data > "$0"/data', theirs]).returncode == 0
    result = world.cli(OWNER, "submit", theirs, "--", world.script())
    assert result.returncode == 2 and "run directory %s: it belongs to %s" % (theirs, MATE) \
        in result.stderr and "delete" not in result.stderr, result.stderr


def hold_lock(user, path, kind="SH"):
    """A process of ``user`` (root: None) that opened ``path`` while it could and holds a lockf
    on it (shared: "SH") for ever: started, and waited for until it holds it."""
    holder = subprocess.Popen(
        [PYTHON, "-c", "import fcntl, sys, time\nhandle = open(sys.argv[1], '%s')\n"
         "fcntl.lockf(handle, fcntl.LOCK_%s)\nprint('held', flush=True)\ntime.sleep(600)"
         % ("rb" if kind == "SH" else "ab", kind), path], stdout=subprocess.PIPE,
        universal_newlines=True, preexec_fn=user and (lambda: (
            os.setgid(grp.getgrnam(GROUP).gr_gid), os.setuid(pwd.getpwnam(user).pw_uid))))
    assert holder.stdout.readline() == "held\n"
    return holder


@pytest.mark.parametrize("left", [
    "left 0644 by an older release",
    "made 0600 by 0.7's chmod after the colleague opened it",
])
def test_a_lock_file_a_colleague_holds_open_is_replaced_not_waited_on(world, left):
    """A colleague's shared lockf on a lock file she could open once would stop every writer of
    the chain for ever (an open descriptor survives chmod): the owner's next command replaces
    the file, and the colleague holds a lock on a file no one uses."""
    run_dir = owners_chain_with_journal(world, "lock-held-%d" % len(left), 0o644)
    lock = os.path.join(run_dir, ".resumable_chain.lock")
    assert world.run(OWNER, ["/bin/sh", "-c", "touch %s && chmod 644 %s" % (lock, lock)]
                     ).returncode == 0
    holder = hold_lock(MATE, lock)
    try:
        held = os.stat(lock).st_ino
        if "0600" in left:
            os.chmod(lock, 0o600)
        result = world.cli(OWNER, "cancel", run_dir, timeout=30)  # it waited 300 s
        assert result.returncode == 0, result.stderr
        assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600 and os.stat(lock).st_ino != held
        assert [name for name in os.listdir(run_dir) if ".lock" in name] == [
            ".resumable_chain.lock"]
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_that_stays_held_names_its_holder(world):
    rc = the_module(world)
    run_dir = tempfile.mkdtemp(dir=world.top)
    lock = os.path.join(run_dir, ".resumable_chain.lock")
    holder = hold_lock(None, lock, "EX")
    try:
        os.chmod(lock, 0o600)
        with pytest.raises(rc.StateError) as refused:
            with rc.StateStore(run_dir).locked(wait=0.5):
                pass
        assert "(pid %d of root) has held %s" % (holder.pid, lock) in str(refused.value)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("files", ["written by this release", "left 0644 by an earlier one",
                                   "left 0644, then kept as *.prev by the next submit"])
def test_export_values_are_in_no_file_others_can_read(world, files):
    """sbatch --export=ALL,HF_TOKEN=... gives a job a token: the records that keep the chain's
    options are then the owner's alone, as the notify file; ones an earlier release left 0644
    are made so by the owner's next command."""
    run_dir = os.path.join(world.runs, "export-%d" % len(files))
    result = world.cli(OWNER, "submit", run_dir, "--export=ALL,HF_TOKEN=TOKEN456", "--",
                       world.script())
    assert result.returncode == 0, result.stderr
    log = world.as_job(OWNER, os.path.join(run_dir, "resumable-job.sh"), result.stdout.strip())
    assert log.returncode == 0 and "TOKEN456" not in log.stdout + log.stderr, log.stderr
    if files.startswith("left"):
        for name in (".resumable_chain.submit.json", ".resumable_chain.json"):
            os.chmod(os.path.join(run_dir, name), 0o644)
        if files.endswith("submit"):
            for job, fields in world.jobs().items():
                if fields["state"] in ("PENDING", "RUNNING"):
                    world.set_job(job, state="CANCELLED", end="2026-11-30T02:00:00")
            argv = ["submit", run_dir, "--", world.script()]
        else:
            argv = ["cancel", run_dir]
        assert world.cli(OWNER, *argv).returncode == 0
    for directory, _, names in os.walk(run_dir):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                if b"TOKEN456" in handle.read():
                    assert not os.stat(path).st_mode & 0o044, path
    peer = world.cli(PEER, "status", "--json", run_dir)
    assert "TOKEN456" not in peer.stdout + peer.stderr and "Traceback" not in peer.stderr


def slurm_expands(pattern, job_id, name):
    """What slurmstepd makes of a batch job's --output (src/slurmd/common/fname.c: %% is one %;
    seen on 22.05: a directory named run%x-%j put the log in runNAME-ID, job FAILED 0:53)."""
    return re.sub("%([%jx])", lambda found: {"%": "%", "j": job_id, "x": name}[found.group(1)],
                  pattern)


def test_a_run_directory_with_a_percent_sign_gets_the_logs_slurm_writes(world):
    run_dir = os.path.join(world.runs, "lr-1e%x-100%%-%j")
    calls = len(world.sbatch_calls())
    result = world.cli(OWNER, "submit", run_dir, "--", world.script())
    assert result.returncode == 0, result.stderr
    first = result.stdout.strip()
    link = world.as_job(OWNER, os.path.join(run_dir, "resumable-job.sh"), first)
    assert link.returncode == 0, link.stderr
    logs = {}
    for call in world.sbatch_calls()[calls:]:
        output = [word.split("=", 1)[1] for word in call["argv"] if word.startswith("--output=")]
        logs[output[-1].rsplit("/", 1)[-1]] = slurm_expands(output[-1], "77", "job")
    assert logs == {"slurm-%j.out": os.path.join(run_dir, "slurm-77.out"),
                    ".resumable_chain.guard.log": os.path.join(run_dir,
                                                               ".resumable_chain.guard.log")}


@pytest.mark.parametrize("group, accepted", [
    ("the owner's private group (umask 002)", True),
    ("a group named as the owner with a second member", False),
    ("a group named as the owner that is not their primary group", False),
])
def test_a_directory_only_the_owners_private_group_can_write_is_the_owners_alone(world, group,
                                                                                 accepted):
    # Issue 40: with user private groups (umask 002, the group holds only its user) a 0775 run
    # directory was refused although no one else could write it.
    user = {True: "rcsolo"}.get(accepted, "rcsolo2" if "second" in group else "rcsolo3")
    if subprocess.run(["getent", "passwd", user], stdout=subprocess.DEVNULL).returncode:
        subprocess.run(["useradd", "-M", "-U", "-s", "/bin/sh", user], check=True)
        if "second member" in group:
            subprocess.run(["usermod", "-aG", user, MATE], check=True)
        elif "not their primary" in group:
            subprocess.run(["usermod", "-g", GROUP, user], check=True)
    entry = pwd.getpwnam(user)
    home = os.path.join(world.top, "home-" + user)  # 0775 as umask 002 leaves it, and above
    os.makedirs(home)
    os.chown(home, entry.pw_uid, grp.getgrnam(user).gr_gid)
    os.chmod(home, 0o775)
    run_dir = os.path.join(home, "runs", "a")
    assert world.run(user, ["mkdir", "-p", run_dir]).returncode == 0
    subprocess.run(["chgrp", "-R", user, home], check=True)  # the group named as the user
    assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o775
    result = world.cli(user, "submit", run_dir, world.script())
    if accepted:
        assert result.returncode == 0, result.stderr
        link = world.as_job(user, os.path.join(run_dir, "resumable-job.sh"), result.stdout.strip())
        assert link.returncode == 0 and link.stdout.strip() == "work", link.stderr
        assert "verdict: running" in world.cli(user, "status", run_dir).stdout
    else:
        assert result.returncode == 2 and "(mode 0775) lets others" in result.stderr, result.stderr


def test_a_rendered_chains_own_symlinked_script_in_the_run_directory_is_still_queued(tmp_path):
    # Review: 0f047ef queued DIR/job.sh -> ../job.sh; runnable_script refused it as a planted
    # symlink after the journal recorded the decision: link 1 exited 2 with no successor and no
    # guard, saying "nothing was changed". A symlink of the caller's is no planted file.
    import fake_cluster
    cluster = fake_cluster.FakeCluster(str(tmp_path / "cluster"))
    run_dir = str(tmp_path / "runs" / "a")
    os.makedirs(run_dir)
    target = cluster.write_script(run_dir, script=os.path.join(run_dir, "job.sh"))
    link = os.path.join(run_dir, "job.sh")
    os.symlink(target, link)
    result = cluster.run_link(link, 100)
    assert result.returncode == 0 and "refusing" not in result.stderr, result.stderr
    [successor] = cluster.pending()
    assert cluster.job(successor)["script"] == link


def test_a_private_group_that_is_another_accounts_primary_group_is_not_private(tmp_path):
    # Review: foreign_write took a group named as the owner, their primary group with no listed
    # member, as the owner's alone; an account whose primary group it is too (not in gr_mem)
    # can write a 0775 run directory.
    for user, how in (("rcupg1", ["-U"]), ("rcupg2", ["-N", "-g", "rcupg1"])):
        if subprocess.run(["getent", "passwd", user], stdout=subprocess.DEVNULL).returncode:
            subprocess.run(["useradd", "-M", "-s", "/bin/sh"] + how + [user], check=True)
    owner = pwd.getpwnam("rcupg1")
    run_dir = tmp_path / "a"
    run_dir.mkdir()
    os.chown(str(run_dir), owner.pw_uid, owner.pw_gid)
    os.chmod(str(run_dir), 0o775)
    assert pwd.getpwnam("rcupg2").pw_gid == owner.pw_gid  # rcupg2 can write the directory
    import resumable_chain
    resumable_chain._private_group.cache_clear()  # as a new process: no earlier answer
    assert resumable_chain.foreign_write(os.stat(str(run_dir)), str(run_dir)) == 0o020


def test_status_of_many_chains_lists_the_accounts_once_not_once_per_chain(tmp_path, monkeypatch):
    # Review: status judges each own run directory; at a umask 002 site each is 0775, and
    # pwd.getpwall() (every account: slow where LDAP enumerates) ran once per chain.
    if subprocess.run(["getent", "passwd", "rcupg1"], stdout=subprocess.DEVNULL).returncode:
        subprocess.run(["useradd", "-M", "-s", "/bin/sh", "-U", "rcupg1"], check=True)
    owner = pwd.getpwnam("rcupg1")
    import resumable_chain
    resumable_chain._private_group.cache_clear()
    listed = []
    monkeypatch.setattr(pwd, "getpwall", lambda: listed.append(1) or [owner])
    try:
        for name in "abc":
            run_dir = tmp_path / name
            run_dir.mkdir()
            os.chown(str(run_dir), owner.pw_uid, owner.pw_gid)
            os.chmod(str(run_dir), 0o775)
            assert resumable_chain.foreign_write(os.stat(str(run_dir)), str(run_dir)) == 0  # private
    finally:
        resumable_chain._private_group.cache_clear()  # the faked list must not outlive the test
    assert listed == [1]


@pytest.mark.parametrize("name, mode, kept", [
    (".gym_job_chain", 0o644, "100\n101\n"),
    (".gym_job_chain", 0o600, "100\n101\n"),  # the rewrite keeps the file's mode
    (".resumable_chain.guard.log", 0o666, ""),  # others could write it: its lines are not kept
], ids=["chain file", "private chain file", "guard log others could write"])
def test_a_state_file_with_a_second_name_is_never_written_through_it(tmp_path, name, mode, kept):
    # Attack trial: a hard link planted while the directory was open (to a file of the owner's
    # that others may write): the guard log's emptying truncated the file elsewhere. The review:
    # refusing it stopped a chain whose directory a snapshot (cp -al) had linked; a rewritten
    # chain file came back 0644. (The owner's own 0644 guard log stays: a running guard's output
    # is open in it, and a copy would lose its line.)
    import resumable_chain
    run_dir, elsewhere = tmp_path / "run", tmp_path / "shared.txt"
    run_dir.mkdir()
    elsewhere.write_text("100\n")
    os.chmod(str(elsewhere), mode)
    os.link(str(elsewhere), str(run_dir / name))
    store = resumable_chain.chain_store(str(run_dir))
    if name.endswith(".log"):
        resumable_chain.own_guard_log(str(run_dir))
        with open(str(run_dir / name), "a") as log:  # a guard's line, as Slurm appends it
            log.write("101\n")
        assert (run_dir / name).read_text() == kept + "101\n"
    else:
        with store.locked():
            store.append_job("101")
        assert (run_dir / name).read_text() == kept
    assert elsewhere.read_text() == "100\n" and os.stat(str(run_dir / name)).st_nlink == 1
    assert stat.S_IMODE(os.stat(str(elsewhere)).st_mode) == mode
    assert stat.S_IMODE(os.stat(str(run_dir / name)).st_mode) == mode & ~0o022


def test_a_budget_whose_file_is_a_dangling_symlink_is_never_reset(tmp_path, monkeypatch):
    # Attack trial: set_budget took a budget file it could not read but that did not exist by
    # os.path.exists (a dangling symlink) as no budget, and wrote a fresh one: used time lost.
    import resumable_chain
    monkeypatch.setenv("PATH", "/nonexistent")  # a fresh budget would ask Slurm its cluster
    budget = tmp_path / "budget"
    budget.mkdir()
    planted = budget / resumable_chain.BUDGET_FILE
    os.symlink(str(tmp_path / "gone" / "budget.json"), str(planted))
    with pytest.raises(resumable_chain.StateError, match="symlink"):
        resumable_chain.set_budget(str(budget), 3600)
    assert os.path.islink(str(planted)) and not os.path.exists(str(tmp_path / "gone"))


@pytest.mark.parametrize("argv", [["render", "rel/../run"], ["budget", "rel/../run",
                                                              "--max-walltime", "1:00:00"]])
def test_a_path_through_a_missing_directory_and_dotdot_makes_only_what_it_names(
        tmp_path, monkeypatch, capsys, argv):
    # Attack trial: the directory was made by its absolute path (no rel needed), then checked by
    # the raw one (rel missing): an error, and a directory left behind.
    import resumable_chain
    monkeypatch.chdir(str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")  # budget's report asks squeue: none here
    monkeypatch.setattr(resumable_chain, "current_cluster", lambda *args: "local")
    assert resumable_chain.main(argv) == 0, capsys.readouterr().err
    assert os.listdir(str(tmp_path)) == ["run"]


def test_an_error_is_one_line_whatever_the_path_holds(tmp_path, monkeypatch, capsys):
    import resumable_chain
    monkeypatch.setenv("PATH", "/nonexistent")
    run_dir = tmp_path / "nl\nresumable-chain: error: FORGED"
    run_dir.mkdir()
    for command in ("status", "cancel", "resume"):
        assert resumable_chain.main([command, str(run_dir)]) in (1, 2)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("resumable-chain: error: "), err


def test_a_private_groups_write_bit_that_is_an_acls_mask_is_not_private(tmp_path):
    # Attack trial: with an ACL the group bits are its mask, and user:<someone>:rwx made a
    # directory 0775 that the owner's private group rule took as the owner's alone.
    import struct
    import resumable_chain
    if subprocess.run(["getent", "passwd", "rcacl1"], stdout=subprocess.DEVNULL).returncode:
        subprocess.run(["useradd", "-M", "-s", "/bin/sh", "-U", "rcacl1"], check=True)
    owner = pwd.getpwnam("rcacl1")
    run_dir = str(tmp_path / "a")
    os.mkdir(run_dir)
    os.chown(run_dir, owner.pw_uid, owner.pw_gid)
    os.chmod(run_dir, 0o775)
    resumable_chain._private_group.cache_clear()
    assert resumable_chain.foreign_write(os.stat(run_dir), run_dir) == 0  # the private group's
    entries = [(0x01, 7, 0xFFFFFFFF), (0x02, 7, 54321), (0x04, 5, 0xFFFFFFFF),
               (0x10, 7, 0xFFFFFFFF), (0x20, 5, 0xFFFFFFFF)]  # user::rwx user:54321:rwx ...
    try:
        os.setxattr(run_dir, "system.posix_acl_access", struct.pack("<I", 2) + b"".join(
            struct.pack("<HHI", *entry) for entry in entries))
    except OSError as error:
        pytest.skip("no POSIX ACLs on %s: %s" % (tmp_path, error))
    assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o775
    assert resumable_chain.foreign_write(os.stat(run_dir), run_dir) == 0o020


def test_a_symlink_of_someone_elses_inside_a_symlinks_target_is_refused(tmp_path):
    # Attack trial: home/via -> shared/link/run, shared/link -> home (a colleague's symlink): the
    # path's own parts and its real path are all the owner's, the colleague's symlink between.
    import resumable_chain
    if subprocess.run(["getent", "passwd", "rcupg1"], stdout=subprocess.DEVNULL).returncode:
        subprocess.run(["useradd", "-M", "-s", "/bin/sh", "-U", "rcupg1"], check=True)
    home, shared = tmp_path / "home", tmp_path / "shared"
    (home / "run").mkdir(parents=True)
    shared.mkdir()
    os.chmod(str(shared), 0o1777)
    os.symlink(str(home), str(shared / "link"))
    os.lchown(str(shared / "link"), pwd.getpwnam("rcupg1").pw_uid, -1)
    os.symlink(str(shared / "link" / "run"), str(home / "via"))
    assert resumable_chain.unsafe_path(str(home / "run")) is None
    assert "the symlink %s belongs to rcupg1" % (shared / "link") in resumable_chain.unsafe_path(
        str(home / "via"))


def test_a_stale_lock_broken_twice_at_once_leaves_the_second_breakers_lock(tmp_path,
                                                                           monkeypatch):
    # Attack trial: A and B judged one .held stale; B broke it and made its own between A's
    # look at the holder and A's unlink, which then removed B's: two writers at once.
    import resumable_chain as rc
    store = rc.chain_store(str(tmp_path))
    held = store.path(rc.LOCK_FILE + rc.HELD_SUFFIX)
    stale = rc.Holder(None, None, "elsewhere", 1, 0, "stale")
    rc._create_held(held, stale)
    read, acted = store._read_holder, []

    def read_then_b_acts(path):
        holder = read(path)
        if not acted:  # B, in A's window: breaks the stale lock if still there, takes its own
            acted.append(1)
            if getattr(read(held), "token", None) == "stale":
                os.unlink(held)
            rc._create_held(held, stale._replace(host=os.uname().nodename, token="B's"))
        return holder
    monkeypatch.setattr(store, "_read_holder", read_then_b_acts)
    store._drop_held(held, "stale")  # A
    assert read(held).token == "B's"


@pytest.mark.parametrize("below", ["run", "a/b/run"])
def test_a_run_directory_to_be_made_below_a_directory_others_can_rename_in_is_refused(tmp_path,
                                                                                      below):
    # Review: the walk stopped at the first missing name before its directory was looked at, so
    # make_run_dir made a/ in a world-writable directory (no sticky bit), then refused.
    import resumable_chain
    open_dir = tmp_path / "ww"
    open_dir.mkdir()
    os.chmod(str(open_dir), 0o777)
    with pytest.raises(resumable_chain.StateError, match="lets others rename what is in it"):
        resumable_chain.make_run_dir(str(open_dir / below))
    assert os.listdir(str(open_dir)) == []


@pytest.mark.parametrize("tools, warned", [
    ("root's, writable by all without a sticky bit", True),
    ("root's, writable by root alone", False),
])
@pytest.mark.parametrize("command", ["submit", "render"])
def test_a_module_others_could_replace_is_warned_of(world, tools, warned, command):
    """An attacker's trial on 26.05: a colleague replaced the module in a tools directory her
    group could write in (no sticky bit); the next link and its guard ran her code as the owner."""
    folder = os.path.join(world.top, "tools-%s-%d" % (command, len(tools)))
    os.mkdir(folder)
    os.chmod(folder, 0o777 if warned else 0o755)
    module = shutil.copy(world.module, os.path.join(folder, "resumable_chain.py"))
    run_dir = os.path.join(world.runs, "module-%s-%d" % (command, len(tools)))
    words = [run_dir, "--", world.script()] if command == "submit" else [run_dir]
    result = world.run(OWNER, [PYTHON, module, command] + words)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert ("WARNING: others could replace the module %s (%s is root's, mode 0777)" % (
        module, folder) in result.stderr) is warned, result.stderr


def test_a_log_directory_linked_to_a_shared_one_elsewhere_is_the_users_to_keep(world):
    """The review: logs -> /shared/proj/logs (the project's, its group may write) was refused, and
    the chmod go-w it said would have closed the shared directory on the colleagues."""
    shared = os.path.join(world.top, "shared-logs")
    os.mkdir(shared)
    os.chmod(shared, 0o777)  # the project's, anyone there may write in it
    run_dir = os.path.join(world.runs, "linked-logs")
    mkdir_as(world, OWNER, run_dir, 0o755)
    os.symlink(shared, os.path.join(run_dir, "logs"))
    os.lchown(os.path.join(run_dir, "logs"), pwd.getpwnam(OWNER).pw_uid, -1)
    result = world.cli(OWNER, "submit", run_dir, "--output=logs/%j.out", "--", world.script())
    assert result.returncode == 0, result.stderr


def test_a_rendered_chains_first_job_checks_its_scripts_log_directory(world):
    """The review: a rendered chain's first job checked the prologue's sbatch options alone, not
    its script's #SBATCH --output (where such chains name their logs)."""
    run_dir = os.path.join(world.runs, "rendered-logs")
    folder = os.path.join(run_dir, "logs")
    mkdir_as(world, OWNER, folder, 0o775)  # mkdir -p under umask 002: the group may write
    assert world.run(OWNER, ["chmod", "go-w", run_dir]).returncode == 0  # not logs/
    prologue = world.cli(OWNER, "render", run_dir, "--python", PYTHON).stdout
    assert prologue
    rendered = os.path.join(world.homes[OWNER], "rendered-logs.sh")
    with open(rendered, "w") as handle:
        handle.write("#!/bin/bash\n#SBATCH --time=10\n#SBATCH --output=%s/%%j.out\n%secho WORK "
                     "RAN\n" % (folder, prologue))
    os.chmod(rendered, 0o755)
    result = world.as_job(OWNER, rendered, "4310")
    assert result.returncode == 2 and "WORK RAN" not in result.stdout, result.stderr
    assert "log directory %s: mode" % folder in result.stderr and "lets its group write it" in \
        result.stderr, result.stderr
