"""Unit tests for resumable_chain: the decision table, parsers fed by real Slurm outputs
(tests/slurm_outputs), validators, the state JSON, rendering and the command line. The
rendered prologue against a fake Slurm and real clusters is tested under tests/."""
import contextlib
import io
import json
import random
import re
import shlex
import shutil
import os
import subprocess
import sys
import time

import pytest

import resumable_chain as rc
from resumable_chain import NOT_VISIBLE, decide


@pytest.fixture(autouse=True)
def in_a_scratch_directory(tmp_path, monkeypatch):
    """Relative run directories ("runs/a": render creates them) land in a scratch directory,
    not in the checkout."""
    monkeypatch.chdir(tmp_path)

# --------------------------------------------------------------------------- decide()

DECISIONS = [
    # (situation, state, retries, walltime, max_retries, max_walltime, action, new retries)
    ("first job", None, 2, 500, 3, None, "start", 0),
    ("predecessor not visible", NOT_VISIBLE, 1, 0, 3, None, "resume", 1),
    ("completed", "COMPLETED", 1, 10, 3, None, "complete", 1),
    ("cancelled by slurm", "CANCELLED", 0, 0, 3, None, "stop", 0),
    ("cancelled by user", "CANCELLED by 1234", 0, 0, 3, None, "stop", 0),
    ("cancelled truncated", "CANCELLED+", 0, 0, 3, None, "stop", 0),
    ("timeout no cap", "TIMEOUT", 0, 10 ** 9, 3, None, "resume", 0),
    ("timeout under cap", "TIMEOUT", 0, 99, 3, 100, "resume", 0),
    ("timeout at cap", "TIMEOUT", 0, 100, 3, 100, "stop", 0),
    ("timeout over cap", "TIMEOUT", 2, 101, 3, 100, "stop", 2),
    ("preempted", "PREEMPTED", 3, 5, 3, None, "resume", 3),
    ("preempted at cap", "PREEMPTED", 0, 100, 3, 100, "stop", 0),
    ("node fail", "NODE_FAIL", 3, 5, 3, 100, "resume", 3),
    ("node fail at cap", "NODE_FAIL", 0, 100, 3, 100, "stop", 0),
    ("failed first retry", "FAILED", 0, 0, 3, None, "resume", 1),
    ("failed reaching max", "FAILED", 2, 0, 3, None, "resume", 3),
    ("failed over max", "FAILED", 3, 0, 3, None, "fail", 4),
    ("failed with max 0", "FAILED", 0, 0, 0, None, "fail", 1),
    ("out of memory", "OUT_OF_MEMORY", 0, 0, 3, None, "resume", 1),
    ("boot fail", "BOOT_FAIL", 0, 0, 3, None, "resume", 1),
    ("deadline", "DEADLINE", 0, 0, 3, None, "resume", 1),
    ("unknown future state", "EXPLODED", 0, 0, 3, None, "resume", 1),
    ("failed ignores walltime cap", "FAILED", 0, 500, 3, 100, "resume", 1),
    ("still running is lag", "RUNNING", 1, 0, 3, None, "resume", 1),
    ("still pending is lag", "PENDING", 0, 0, 0, None, "resume", 0),
    ("requeued is lag", "REQUEUED", 0, 0, 3, None, "resume", 0),
    ("lowercase state", "timeout", 0, 0, 3, None, "resume", 0),
]


@pytest.mark.parametrize("situation,state,retries,walltime,max_retries,max_walltime,action,new_retries",
                         DECISIONS, ids=[row[0] for row in DECISIONS])
def test_decide_table(situation, state, retries, walltime, max_retries, max_walltime, action,
                      new_retries):
    decision = decide(state, retries=retries, walltime=walltime, max_retries=max_retries,
                      max_walltime=max_walltime)
    assert (decision.action, decision.retries) == (action, new_retries)
    assert decision.action in rc.ACTIONS
    assert decision.reason and "\n" not in decision.reason


BUDGET = [
    ("no cap", "resume", 10 ** 6, None, "resume"),
    ("a minute left", "resume", 40, 100, "resume"),
    ("under a minute left", "resume", 41, 100, "stop"),
    ("first job with a tiny cap", "start", 0, 30, "stop"),
    ("terminal decisions untouched", "fail", 99, 100, "fail"),
]


@pytest.mark.parametrize("action,walltime,max_walltime,expected", [r[1:] for r in BUDGET],
                         ids=[r[0] for r in BUDGET])
def test_stop_at_cap(action, walltime, max_walltime, expected):
    decision = rc.stop_at_cap(rc.Decision(action, 0, "x"), walltime, max_walltime)
    assert decision.action == expected


def test_decide_is_keyword_only():
    with pytest.raises(TypeError):
        decide("FAILED", 1)


@pytest.mark.parametrize("name,value", [
    ("max_walltime", "48:00:00"), ("walltime", "3600"), ("retries", -1), ("max_retries", True),
    ("walltime", 12.5)], ids=["a YAML duration not parsed", "a state file's text not parsed",
                              "negative retries", "a boolean", "a float"])
def test_decide_refuses_what_is_not_a_count_in_one_line(name, value):
    with pytest.raises(ValueError, match="^%s must be a whole number from 0 to" % name):
        decide("TIMEOUT", **{name: value})

@pytest.mark.parametrize("situation,state,max_walltime,action,cause", [
    ("work is done", "COMPLETED", None, "complete", "completed"),
    ("a person cancelled the predecessor", "CANCELLED by 0", None, "stop", "cancelled"),
    ("timeout at the cap", "TIMEOUT", 100, "stop", "max_walltime"),
    ("less than a minute of the cap left", "TIMEOUT", 130, "stop", "max_walltime"),
    ("retries exhausted", "FAILED", None, "fail", "max_retries"),
    ("timeout under the cap", "TIMEOUT", 1000, "resume", None),
])
def test_plan_link_records_why_the_chain_ended(situation, state, max_walltime, action, cause):
    snapshot = rc.Snapshot(walltime=50, retries=0, last_job="7", cancelled=None, record=rc.Record(
        job="7", action="start", link=1, walltime=0, retries=0))
    observation = rc.Observation(rc.Job("7", state, 50), "scontrol", "")
    record = rc.plan_link("8", "7", observation, snapshot, rc.Settings(0, max_walltime),
                          rc.NextLink("job.sh"), now=0)
    assert (record.action, record.cause) == (action, cause)
    assert cause is None or cause in rc.STOP_CAUSES


# --------------------------------------------------------------------------- parsers

WALLTIMES = [
    ("minutes", "90", 5400), ("minutes and seconds", "1:30", 90), ("hours", "48:00:00", 172800),
    ("days and hours", "0-06", 21600), ("days hours minutes", "1-02:03", 93780),
    ("days hours minutes seconds", "1-00:00:01", 86401), ("padded", " 10 ", 600),
    ("seconds as int", 3600, 3600), ("seconds with s", "5400s", 5400),
    ("days with nothing after the dash (sbatch reads a day)", "1-", 86400),
]


@pytest.mark.parametrize("text,seconds", [row[1:] for row in WALLTIMES], ids=[r[0] for r in WALLTIMES])
def test_parse_walltime(text, seconds):
    assert rc.parse_walltime(text) == seconds


BAD_WALLTIMES = ["", "0", "00:00:00", "0-0", "abc", "1:2:3:4", "-1", "INFINITE", "UNLIMITED",
                 "1.5", "١٢", "48h", "-5", "1:-2", "48:00:00\nx", 0, -5, True, None, 1.5, "0s",
                 "s", "1:00s"]


@pytest.mark.parametrize("text", BAD_WALLTIMES, ids=[repr(t) for t in BAD_WALLTIMES])
def test_parse_walltime_rejects(text):
    with pytest.raises(ValueError) as error:
        rc.parse_walltime(text)
    assert repr(text) in str(error.value) and "D-H:M:S" in str(error.value)
    assert ("int of seconds" in str(error.value)) is not isinstance(text, str)  # 90 is 90 s


@pytest.mark.parametrize("text", ["9" * 5000, "1-" + "9" * 5000, "9" * 19 + ":00"],
                         ids=["5000 digits", "5000 digits of days", "19 digits of minutes"])
def test_parse_walltime_refuses_a_number_no_duration_has_in_one_short_line(text):
    with pytest.raises(ValueError) as error:
        rc.parse_walltime(text)
    assert str(error.value).startswith("invalid walltime '") and len(str(error.value)) < 250


RESUMABLE = [
    ("off", False, None), ("absent", None, None), ("on", True, rc.Settings(3, None)),
    ("empty mapping", {}, rc.Settings(3, None)),
    ("retries", {"max_retries": 5}, rc.Settings(5, None)),
    ("zero retries", {"max_retries": 0}, rc.Settings(0, None)),
    ("walltime", {"max_walltime": "48:00:00"}, rc.Settings(3, 172800)),
    ("both", {"max_retries": 1, "max_walltime": 600}, rc.Settings(1, 600)),
    ("null retries (YAML's empty value) as null walltime: the default", {"max_retries": None},
     rc.Settings(3, None)),
    ("a mapping with keys() and [] only", type("Mapping", (), {
        "keys": lambda self: ["max_retries"], "__getitem__": lambda self, key: 2})(),
     rc.Settings(2, None)),
]


@pytest.mark.parametrize("value,expected", [r[1:] for r in RESUMABLE], ids=[r[0] for r in RESUMABLE])
def test_parse_resumable(value, expected):
    assert rc.parse_resumable(value) == expected


BAD_RESUMABLE = [
    ("unknown key", {"max_retry": 3}, "max_retry"), ("bool retries", {"max_retries": True}, "max_retries"),
    ("negative retries", {"max_retries": -1}, "max_retries"),
    ("string retries", {"max_retries": "3"}, "max_retries"),
    ("zero walltime", {"max_walltime": "0"}, "max_walltime"),
    ("bad walltime", {"max_walltime": "2 days"}, "max_walltime"),
    ("string", "yes", "resumable"), ("number", 1, "resumable"),
    ("a number for a key, shown as one", {1: 2}, "unknown key 1;"),
    ("keys() without []", type("Keys", (), {"keys": lambda self: ["max_retries"]})(),
     "resumable must be true, false or a mapping"),
]


@pytest.mark.parametrize("value,named", [r[1:] for r in BAD_RESUMABLE], ids=[r[0] for r in BAD_RESUMABLE])
def test_parse_resumable_rejects(value, named):
    with pytest.raises(ValueError) as error:
        rc.parse_resumable(value)
    assert named in str(error.value)


def driver_example():
    """resumable_run_overrides, as docs/driver-example.md shows it (its first python block)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "docs", "driver-example.md")
    with open(path, encoding="utf-8") as page:
        code = page.read().split("```python\n")[1].split("```")[0]
    namespace = {}
    exec(compile(code, path, "exec"), namespace)
    return namespace["resumable_run_overrides"]


def test_run_overrides_add_resume_from_cache_without_mutating():
    benchmark = {"resumable": True, "run": {"config_paths": ["a.yaml"], "limit": 5}}
    before = json.dumps(benchmark, sort_keys=True)
    overrides = driver_example()(benchmark, "slurm")
    assert overrides == {"config_paths": ["a.yaml"], "limit": 5, "resume_from_cache": True}
    assert json.dumps(benchmark, sort_keys=True) == before
    overrides["config_paths"].append("b.yaml")
    assert benchmark["run"]["config_paths"] == ["a.yaml"]


@pytest.mark.parametrize("settings,executor,expected", [
    ({"resumable": {"max_retries": 1}, "run": {"resume_from_cache": False}}, "Slurm",
     {"resume_from_cache": False}),
    ({"run": {"x": 1}}, "local", {"x": 1}),
    ({"resumable": None, "command": "python eval.py", "run": {"x": 1}}, "local", {"x": 1}),
], ids=["the user's choice is kept", "unset: nothing changes", "off: nothing is refused"])
def test_run_overrides_keep_the_users_choice_and_leave_a_run_that_is_not_resumable_alone(
        settings, executor, expected):
    assert driver_example()(settings, executor) == expected


@pytest.mark.parametrize("settings,executor,message", [
    ({"resumable": True, "run": {}}, "local", "slurm executor"),
    ({"resumable": True, "command": "python eval.py"}, "slurm", "command"),
    ({"resumable": {"bogus": 1}}, "slurm", "bogus"),
], ids=["not slurm", "benchmark command", "bad setting"])
def test_run_overrides_reject(settings, executor, message):
    with pytest.raises(ValueError) as error:
        driver_example()(settings, executor)
    assert message in str(error.value)


SACCT_OUTPUT = (
    "9|TIMEOUT|73|2026-11-30T01:00:00|2026-11-30T01:00:00|2026-11-30T01:01:13\n"
    "9.batch|CANCELLED|73|2026-11-30T01:00:00|2026-11-30T01:00:00|2026-11-30T01:01:13\n"
    "9.extern|COMPLETED|73|2026-11-30T01:00:00|2026-11-30T01:00:00|2026-11-30T01:01:13\n"
    "6|CANCELLED by 0|2|2026-11-30T01:00:00|2026-11-30T01:00:00|2026-11-30T01:00:02\n"
    "garbage line\n"
)


def test_parse_sacct_keeps_allocation_lines_only():
    records = rc.parse_sacct(SACCT_OUTPUT)
    assert list(records) == ["9", "6"]
    assert [(r.state, r.elapsed) for r in records["9"]] == [("TIMEOUT", 73)]
    assert records["6"][0].state == "CANCELLED by 0"


# Real 22.05 `sacct -D` lines of a job requeued by `scontrol requeue` (out of order, as seen).
REQUEUED = ("5|FAILED|15|2026-11-30T07:19:23|2026-11-30T07:19:34|2026-11-30T07:19:49\n"
            "5|REQUEUED|5|2026-11-30T07:19:18|2026-11-30T07:19:18|2026-11-30T07:19:23\n")
REUSED_ID = "5|COMPLETED|999|2025-01-01T00:00:00|2025-01-01T00:00:00|2025-01-01T00:16:39\n"


@pytest.mark.parametrize("text,expected", [
    (REQUEUED, ("FAILED", 20)),
    (REQUEUED + REUSED_ID, ("FAILED", 20)),
    ("5|RUNNING|14|2026-11-30T07:19:23|2026-11-30T07:19:34|Unknown\n" + REQUEUED.split("\n")[1],
     ("RUNNING", 19)),
    ("", None),
], ids=["requeued runs add up", "reused ID not counted", "still running", "no record"])
def test_summarize_sacct(text, expected):
    job = rc.summarize_sacct(rc.parse_sacct(text).get("5"))
    assert (job.state, job.elapsed) == expected if expected else job is None


@pytest.mark.parametrize("text,expected", [
    ("JobId=9 JobName=x JobState=TIMEOUT Reason=TimeLimit RunTime=00:01:13 TimeLimit=00:01:00",
     ("TIMEOUT", 73, 60)),
    ("JobId=9 JobName=x\n   JobState=NODE_FAIL Reason=None\n   RunTime=1-00:00:03 TimeLimit=2-00:00:00",
     ("NODE_FAIL", 86403, 172800)),
    ("JobId=9 JobState=RUNNING RunTime=00:00:05 TimeLimit=UNLIMITED", ("RUNNING", 5, None)),
    ("JobId=4 JobState=CANCELLED Reason=Dependency RunTime=20787-15:08:02 TimeLimit=UNLIMITED "
     "StartTime=Unknown EndTime=2026-11-30T15:48:54", ("CANCELLED", 0, None)),
    ("slurm_load_jobs error: Invalid job id specified", None),
], ids=["one line", "multi line", "unlimited", "never started (22.05 bogus RunTime)",
        "unknown job"])
def test_parse_scontrol(text, expected):
    job = rc.parse_scontrol(text)
    assert (job and (job.state, job.elapsed, job.time_limit)) == expected


@pytest.mark.parametrize("text,expected", [
    ("JobId=5 JobState=FAILED Restarts=\u00b2", None),  # a Unicode digit is not a count
    ("JobId=5 JobState=FAILED Restarts=\u0663", None),
    ("JobId=5 JobState=FAILED Restarts=2", 2),
])
def test_parse_scontrol_reads_only_ascii_restart_counts(text, expected):
    assert rc.parse_scontrol(text).restarts == expected


@pytest.mark.parametrize("exit_code,expected", [
    ("75:0", "75:0"), ("0:15", "0:15"), ("75:x", None), ("abc", None), ("\u0663:0", None)])
def test_parsers_keep_only_an_exit_code_slurm_could_print(exit_code, expected):
    scontrol = rc.parse_scontrol("JobId=5 JobState=FAILED ExitCode=%s" % exit_code)
    sacct = rc.parse_sacct("5|FAILED|3||||%s\n" % exit_code)
    assert (scontrol.exit_code, sacct["5"][0].exit_code) == (expected, expected)


@pytest.mark.parametrize("content", [b"garbage" + b" " * 80 + b"5\n", b"5" + b" " * 100,
                                     b"\xd9\xa3\n", b"0" * 70])
def test_a_counter_is_read_whole(tmp_path, content):
    (tmp_path / rc.RETRIES_FILE).write_bytes(content)
    with pytest.raises(rc.StateError) as error:
        rc.StateStore(str(tmp_path)).read_counter(rc.RETRIES_FILE)
    assert "corrupt state file" in str(error.value)


@pytest.mark.parametrize("content,reason", [
    (b"[1]", "valid JSON, not an object"), (b"{", "Expecting"),
    (b"{}" + b" " * rc.MAX_STATE_BYTES, "longer than %d bytes" % rc.MAX_STATE_BYTES),
], ids=["a JSON list", "cut short", "too long"])
def test_a_corrupt_journal_says_why(tmp_path, content, reason):
    (tmp_path / rc.JOURNAL_FILE).write_bytes(content)
    with pytest.raises(rc.StateError) as error:
        rc.StateStore(str(tmp_path)).read_record()
    assert "corrupt state file" in str(error.value) and reason in str(error.value)


def test_a_long_chain_file_without_job_ids_shows_its_tail(tmp_path):
    (tmp_path / rc.CHAIN_FILE).write_bytes(b"x" * (rc.MAX_STATE_BYTES + 10))
    with pytest.raises(rc.StateError) as error:
        rc.StateStore(str(tmp_path)).chain_jobs()
    assert "content 'xxxx" in str(error.value)  # not '' (its cut first line dropped)


def test_run_slurm_reports_a_missing_command_as_127():
    result = rc.run_slurm(["/nonexistent/sacct", "-j", "1"], timeout=5)
    assert result.returncode == 127 and "No such file" in result.stderr


def test_run_slurm_kills_the_whole_command_on_timeout(tmp_path):
    marker = tmp_path / "grandchild-alive"
    script = "sleep 30 & sleep 0.5; touch %s; wait" % shlex.quote(str(marker))
    started = time.monotonic()
    result = rc.run_slurm(["bash", "-c", script], timeout=0.2)
    assert result.returncode is None and "timed out" in result.stderr
    time.sleep(0.6)
    assert time.monotonic() - started < 5 and not marker.exists()


def test_run_slurm_of_a_missing_command_is_status_127():
    assert rc.run_slurm(["/nonexistent/scontrol"]).returncode == 127


def test_run_slurm_works_with_a_thousand_open_files(tmp_path):
    # A driver that vendors the module may hold many files: descriptors >= 1024 must not matter.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("the hard limit of open files is %d" % hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    handles = [open(os.devnull) for _ in range(1100)]
    try:
        result = rc.run_slurm(["bash", "-c", "echo out; echo err >&2; exit 3"], timeout=10)
    finally:
        for handle in handles:
            handle.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert result == (3, "out\n", "err\n")


# --------------------------------------------------------------------------- which lock a mount needs

# /proc/mounts lines as these clients print them (Lustre 2.15, Linux NFS client, BeeGFS 7, GPFS 5)
MOUNTS = """\
/dev/nvme0n1p2 / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0
10.1.0.1@o2ib:/scratch /lustre/scratch lustre rw,flock,lazystatfs,encrypt 0 0
10.1.0.1@o2ib:/proj /lustre/proj lustre rw,localflock,lazystatfs 0 0
10.1.0.1@o2ib:/old /lustre/old lustre rw,noflock,lazystatfs 0 0
10.1.0.2@tcp:/plain /lustre/plain lustre rw,lazystatfs 0 0
nfs1:/export/home /home nfs4 rw,relatime,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.5,local_lock=none,addr=10.0.0.1 0 0
nfs1:/export/v3 /nfs/v3 nfs rw,relatime,vers=3,rsize=65536,wsize=65536,namlen=255,hard,nolock,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=10.0.0.1,mountvers=3,mountport=20048,mountproto=udp,local_lock=all,addr=10.0.0.1 0 0
nfs1:/export/posix /nfs/posix nfs4 rw,relatime,vers=4.1,hard,proto=tcp,sec=sys,local_lock=posix,addr=10.0.0.1 0 0
nfs1:/export/flock /nfs/flock nfs4 rw,relatime,vers=4.1,hard,proto=tcp,sec=sys,local_lock=flock,addr=10.0.0.1 0 0
beegfs_nodev /mnt/beegfs beegfs rw,relatime,cfgFile=/etc/beegfs/beegfs-client.conf,_netdev 0 0
gpfs1 /gpfs/fs1 gpfs rw,relatime 0 0
nfs1:/export/odd /mnt/with\\040space nfs rw,nolock,local_lock=all 0 0
"""


@pytest.mark.parametrize("path,kind,said", [
    ("/home/alice/runs/a", "kernel", None),  # NFSv4, local_lock=none: locks via the server
    ("/lustre/scratch/alice/run", "kernel", None),  # -o flock: cluster-wide
    ("/lustre/proj/run", "file", "lustre mounted at /lustre/proj with localflock"),
    ("/lustre/old/run", "file", "lustre mounted at /lustre/old with noflock"),
    ("/lustre/plain/run", "kernel", None),  # no option shown: try, fall back on ENOSYS
    ("/nfs/v3/run", "file", "nfs mounted at /nfs/v3 with nolock,local_lock=all"),
    ("/nfs/posix/run", "file", "nfs4 mounted at /nfs/posix with local_lock=posix"),
    ("/nfs/flock/run", "kernel", None),  # flock() local; lockf (POSIX) still via the server
    ("/mnt/beegfs/run", "file", "beegfs mounted at /mnt/beegfs"),
    ("/gpfs/fs1/run", "kernel", None),
    ("/tmp/run", "kernel", None),  # the root ext4
    ("/lustre/scratchpad/run", "kernel", None),  # not under /lustre/scratch: the root's
    ("/mnt/with space/run", "file", "nfs mounted at /mnt/with space with nolock,local_lock=all"),
])
def test_lock_kind_from_the_mount_holding_the_run_dir(path, kind, said):
    found, why = rc.lock_kind(path, {}, rc.parse_mounts(MOUNTS))
    assert found == kind
    assert (why is None) if said is None else why.startswith(said)


@pytest.mark.parametrize("value,kind", [("kernel", "kernel"), ("file", "file")])
def test_lock_kind_forced_by_the_environment(tmp_path, value, kind):
    assert rc.lock_kind(str(tmp_path), {rc.LOCK_ENV: value})[0] == kind


def test_lock_kind_refuses_an_unknown_forced_value(tmp_path):
    with pytest.raises(rc.StateError, match="RESUMABLE_CHAIN_LOCK=flock: use kernel or file"):
        rc.lock_kind(str(tmp_path), {rc.LOCK_ENV: "flock"})


# --------------------------------------------------------------------------- recorded Slurm output

OUTPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "slurm_outputs")
RELEASES = ["22.05", "24.11", "26.05"]  # recorded on each (ci/local-slurm.sh's table)


def recorded(name):
    """(command, exit status, stdout, stderr) of a real Slurm output (tests/slurm_outputs)."""
    with open(os.path.join(OUTPUTS, name + ".txt")) as handle:
        lines = handle.read().split("\n")
    command, status = lines[0][len("# $ "):], int(lines[1][len("# exit "):])
    split = lines.index("# stderr")
    return command, status, "\n".join(lines[2:split]), "\n".join(lines[split + 1:])


def parse_sbatch_output(text):
    """The job ID sbatch printed, or None."""
    try:
        return rc.sbatch_answer(rc.SlurmResult(0, text, ""))[0]
    except rc.StateError:
        return None


@pytest.mark.parametrize("release,held", [("22.05", "1728"), ("24.11", "197"), ("26.05", "716")])
def test_parse_held_by_script_finds_only_the_held_job_running_that_script(release, held):
    # Recorded: a held job running job.sh, its pending dependent, a held job of another script.
    stdout = recorded(release + "/squeue-held-by-script")[2]
    assert rc.parse_held_by_script(stdout, "/tmp/rcprobe/job.sh") == [held]
    assert rc.parse_held_by_script(stdout, "/tmp/rcprobe/other.sh") == []


@pytest.mark.parametrize("release,held", [("22.05", ["9649", "9648"]), ("26.05", ["9606"])])
def test_a_held_job_is_found_by_its_script_whatever_its_arguments(release, held):
    """A new user's Ctrl-C during submit on 22.05 left a held job: its squeue %o held the script's
    arguments too (recorded: sbatch --hold heldtest.sh "a b" c; 22.05's second job has none)."""
    stdout = recorded(release + "/squeue-held-with-args")[2]
    assert rc.parse_held_by_script(stdout, "/tmp/heldtest.sh") == held
    assert rc.parse_held_by_script(stdout, "/tmp/heldtest") == []


@pytest.mark.parametrize("release,state", [("22.05", "CANCELLED"), ("24.11", "CANCELLED by 0"),
                                           ("26.05", "CANCELLED by 0")])
def test_parse_sacct_tells_a_launch_failure_from_a_cancel_before_start(release, state):
    # Recorded: a --no-requeue job whose node Prolog failed (slurmd cancelled it and drained the
    # node), then one cancelled before it ever started (24.11, 26.05: held, a person's scancel; 22.05:
    # its dependency could never be met).
    jobs = rc.parse_sacct(recorded(release + "/sacct-launch-failed")[2])
    assert [(job.state, job.nodes) for [job] in jobs.values()] == [(state, "vm"), (state, None)]


TIMEOUT_26_05 = 85  # RunTime of the recorded --time=1 job

RECORDED_SCONTROL = [
    # (file, state, elapsed, time limit, restarts)
    ("22.05/scontrol-completed", "COMPLETED", 2, None, 0),
    ("22.05/scontrol-failed", "FAILED", 0, None, 0),
    ("22.05/scontrol-preempted", "PREEMPTED", 40, 60, 0),
    ("22.05/scontrol-timeout", "TIMEOUT", 89, 60, 0),
    ("22.05/scontrol-dependency-cancelled", "CANCELLED", 0, None, 0),
    ("22.05/scontrol-held", "PENDING", 0, None, 0),
    ("22.05/scontrol-running", "RUNNING", 9, 60, 0),
    ("24.11/scontrol-completed", "COMPLETED", 2, 365 * 86400, 0),  # backfill's default limit
    ("24.11/scontrol-failed", "FAILED", 0, 365 * 86400, 0),
    ("24.11/scontrol-timeout", "TIMEOUT", 69, 60, 0),
    ("24.11/scontrol-dependency-cancelled", "CANCELLED", 0, None, 0),
    ("24.11/scontrol-held", "PENDING", 0, None, 0),
    ("24.11/scontrol-running", "RUNNING", 11, 60, 0),
    ("26.05/scontrol-completed", "COMPLETED", 2, 365 * 86400, 0),
    ("26.05/scontrol-failed", "FAILED", 0, 365 * 86400, 0),
    ("26.05/scontrol-timeout", "TIMEOUT", TIMEOUT_26_05, 60, 0),
    ("26.05/scontrol-dependency-cancelled", "CANCELLED", 0, None, 0),
    ("26.05/scontrol-held", "PENDING", 0, None, 0),
    ("26.05/scontrol-running", "RUNNING", 8, 60, 0),
]


@pytest.mark.parametrize("name,state,elapsed,limit,restarts", RECORDED_SCONTROL,
                         ids=[row[0] for row in RECORDED_SCONTROL])
def test_parse_recorded_scontrol(name, state, elapsed, limit, restarts):
    command, status, stdout, _ = recorded(name)
    assert command.startswith("scontrol show job -o ") and status == 0
    job = rc.parse_scontrol(stdout)
    assert (job.job_id, job.state, job.elapsed, job.time_limit, job.restarts) == (
        command.split()[-1], state, elapsed, limit, restarts)


@pytest.mark.parametrize("release", RELEASES)
def test_recorded_unknown_job_is_forgotten_by_the_controller(release):
    _, status, stdout, stderr = recorded(release + "/scontrol-unknown")
    assert status == 1 and rc.parse_scontrol(stdout) is None
    assert rc.last_line(stderr) == "slurm_load_jobs error: Invalid job id specified"
    _, status, stdout, _ = recorded(release + "/sacct-unknown")
    assert status == 0 and rc.parse_sacct(stdout) == {}


@pytest.mark.parametrize("name,state,forgotten", [
    ("22.05/scontrol-unknown", None, True), ("24.11/scontrol-unknown", None, True),
    ("26.05/scontrol-unknown", None, True), ("22.05/scontrol-timeout", "TIMEOUT", False),
    ("24.11/scontrol-running", "RUNNING", False), ("26.05/scontrol-held", "PENDING", False)])
def test_controller_job_reads_a_recorded_answer(monkeypatch, name, state, forgotten):
    _, status, stdout, stderr = recorded(name)
    monkeypatch.setattr(rc, "run_slurm", lambda argv, timeout=None: rc.SlurmResult(
        status, stdout, stderr))
    answer = rc.SLURM.controller("136")
    assert (answer.job and answer.job.state, answer.forgotten) == (state, forgotten)
    assert (answer.error is None) == (state is not None)


def test_a_user_squeue_cannot_name_is_an_error_never_no_job_queued(monkeypatch):
    """22.05 says "Invalid user" but exits 0 with no job; 26.05 says nothing for a UID it cannot
    name: "none pending" would let a guard queue a second successor, cancel leave one."""
    _, status, stdout, stderr = recorded("22.05/squeue-invalid-user")
    monkeypatch.setattr(rc, "run_slurm", lambda argv, timeout=None: rc.SlurmResult(
        status, stdout, stderr))
    with pytest.raises(rc.StateError, match="squeue failed: squeue: error: Invalid user: 12345"):
        rc.SLURM.mine(rc.SQUEUE_FORMAT)
    def no_entry(uid):
        raise KeyError(uid)
    monkeypatch.setattr("pwd.getpwuid", no_entry)
    rc._user_name.cache_clear()  # looked up once per process: the test's no_entry is asked
    with pytest.raises(rc.StateError, match="this node has no user name for your uid"):
        rc.SLURM.dependents()


@pytest.mark.parametrize("release", ["24.11", "26.05"])
def test_recorded_23_02_and_later_refuse_a_dependency_on_an_unknown_job(release):
    # Why resume queues its link held and without a dependency (Slurm 23.02 and later).
    command, status, stdout, stderr = recorded(release + "/sbatch-unknown-dependency")
    assert "--dependency=afternotok:999999" in command and status == 1
    assert parse_sbatch_output(stdout) is None
    assert rc.last_line(stderr) == "sbatch: error: Batch job submission failed: Job dependency problem"


@pytest.mark.parametrize("release", RELEASES)
def test_recorded_flag_field_spelling_does_not_matter(release):
    # 22.05 and 24.11 print KillOInInvalidDependent= (sic), 26.05 KillOnInvalidDependent=: never
    # read.
    _, _, stdout, _ = recorded(release + "/scontrol-dependency-cancelled")
    assert ("KillOnInvalidDependent=" if release == "26.05" else "KillOInInvalidDependent=") in stdout
    assert rc.parse_scontrol(stdout).state == "CANCELLED"


RECORDED_SACCT = {  # job ID: (state, elapsed) in tests/slurm_outputs/<release>/sacct-chain.txt
    "22.05": {"117": ("COMPLETED", 2), "118": ("FAILED", 0), "119": ("PREEMPTED", 40),
              "120": ("CANCELLED", 0), "121": ("PENDING", 0), "122": ("COMPLETED", 2)},
    "24.11": {"184": ("COMPLETED", 2), "185": ("FAILED", 0), "186": ("TIMEOUT", 69),
              "187": ("CANCELLED", 0), "188": ("PENDING", 0), "189": ("COMPLETED", 2)},
    "26.05": {"42": ("COMPLETED", 2), "43": ("FAILED", 0), "44": ("TIMEOUT", 85),
              "45": ("CANCELLED", 0), "47": ("PENDING", 0), "48": ("COMPLETED", 2)},
}


@pytest.mark.parametrize("release", sorted(RECORDED_SACCT))
def test_parse_recorded_sacct(release):
    command, status, stdout, _ = recorded(release + "/sacct-chain")
    # recorded before ExitCode was asked for: fields are read by name, in the order asked
    assert rc.SACCT_FIELDS.startswith(command.split(" -o ")[1]) and status == 0
    jobs = {job_id: rc.summarize_sacct(records) for job_id, records in rc.parse_sacct(stdout).items()}
    assert {job_id: (job.state, job.elapsed) for job_id, job in jobs.items()} == RECORDED_SACCT[release]
    pending = [job for job in jobs.values() if job.state == "PENDING"]
    assert pending[0].start is None and pending[0].end is None


@pytest.mark.parametrize("release", RELEASES)
def test_parse_recorded_sacct_time_limits(release):
    command, status, stdout, _ = recorded(release + "/sacct-timelimit")
    assert command.split(" -o ")[1] == rc.SACCT_FIELDS and status == 0
    limits = [records[0].time_limit for records in rc.parse_sacct(stdout).values()]
    assert limits == [60, 86400, None]  # --time=1, 1-00:00:00, UNLIMITED


def test_parse_recorded_sacct_steps():
    _, _, stdout, _ = recorded("22.05/sacct-steps")  # without -X: step lines are not the job
    assert [job.state for job in rc.parse_sacct(stdout)["119"]] == ["PREEMPTED"]


@pytest.mark.parametrize("release", RELEASES)
def test_parse_recorded_squeue_pending_dependents(release):
    _, _, stdout, _ = recorded(release + "/squeue-pending-dependents")
    jobs = rc.parse_squeue(stdout)
    assert jobs and all(job.state == "PENDING" for job in jobs)
    assert [job.predecessor for job in jobs if job.predecessor] == [
        line.split("afternotok:")[1].split("(")[0] for line in stdout.splitlines()
        if "afternotok:" in line]


def test_parse_recorded_squeue():
    _, _, stdout, _ = recorded("22.05/squeue-chain")
    assert [(job.job_id, job.state, job.elapsed, job.start, job.time_limit)
            for job in rc.parse_squeue(stdout)] == [
        ("7", "PENDING", 0, None, 120), ("4", "RUNNING", 18, "2026-12-02T00:06:55", 120)]
    _, _, stdout, _ = recorded("22.05/squeue-pending-dependents")
    assert [(job.job_id, job.predecessor) for job in rc.parse_squeue(stdout)][:2] == [
        ("7", "4"), ("11", None)]  # a guard waits afterany: it continues no link


@pytest.mark.parametrize("line", ["7|PENDING|0:00|N/A|2:00|afternotok:4(unfulfilled)",
                                  "7|PENDING|0:00|N/A|2:00|afternotok:4|Dependency|x"],
                         ids=["a field short", "a field too many"])
def test_parse_squeue_skips_a_line_not_in_its_format(line):
    assert rc.parse_squeue(line + "\n") == []


@pytest.mark.parametrize("release", RELEASES)
def test_parse_recorded_sbatch(release):
    _, status, stdout, _ = recorded(release + "/sbatch-parsable")
    assert status == 0 and parse_sbatch_output(stdout) == stdout.strip()
    _, status, stdout, stderr = recorded(release + "/sbatch-refused")
    assert status == 1 and parse_sbatch_output(stdout) is None
    assert rc.last_line(stderr) == ("sbatch: error: Batch job submission failed: Invalid "
                                    "partition name specified")


# The contract between the fake Slurm (tests/fake_slurm.py) and the real one: for every recorded
# output, a fake cluster holding the jobs it shows prints what parses to the same. sbatch's
# refusals are left out: the fake only prints them when a test asks it to; so is the cluster's
# configuration (scontrol-show-config, read by tests/local_cluster.py only).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests"))
import fake_slurm  # noqa: E402

RECORDINGS = sorted(os.path.relpath(os.path.join(folder, name), OUTPUTS)[:-len(".txt")]
                    for folder, _, names in os.walk(OUTPUTS) for name in names
                    # arrays/: their job IDs (14_0, 18_[1], afternotok:18_*) are checked
                    # against the fake in tests/test_arrays.py
                    if os.path.basename(folder) != "arrays" and (
                        name.endswith(".txt") and not name.startswith(("sbatch-", "scontrol-show-"))
                        or name == "sbatch-parsable.txt"))


def as_fake_job(job, earlier=()):
    """A job of the fake's cluster that shows what a parsed real Job says."""
    return {"state": job.state, "elapsed": job.elapsed, "start": job.start or "Unknown",
            "end": job.end or "Unknown", "submit": job.submit or "2026-11-30T00:00:00",
            "time_limit": "UNLIMITED" if job.time_limit is None else job.time_limit // 60,
            "dependency": "afternotok:%s" % job.predecessor if job.predecessor else "",
            "held": job.reason == "JobHeldUser", "reason": job.reason,
            "exit_code": job.exit_code or "0:0",
            "nodes": job.nodes or "", "runs": [as_fake_job(run) for run in earlier] or [{}] * (job.restarts or 0)}


def understood(command, status, stdout, stderr):
    """What the module reads from one command's answer."""
    if command == "scontrol":
        answer = rc.parse_scontrol(stdout)
    elif command == "sacct":
        answer = {job_id: rc.summarize_sacct(jobs) for job_id, jobs in rc.parse_sacct(stdout).items()}
    elif command == "squeue":
        answer = {job.job_id: job for job in rc.parse_squeue(stdout)}
    else:
        answer = parse_sbatch_output(stdout)
    return status, answer, rc.last_line(stderr) if status else None


@pytest.mark.parametrize("name", RECORDINGS)
def test_the_fake_slurm_prints_what_the_recorded_slurm_printed(name, tmp_path, monkeypatch):
    command, status, stdout, stderr = recorded(name)
    argv = shlex.split(command)
    real = understood(argv[0], status, stdout, stderr)
    cluster = {"jobs": {}, "next_id": 1000,
               argv[0] + "_down": status != 0 and "Unable to contact" in stderr}
    if argv[0] == "scontrol" and real[1]:
        cluster["jobs"][real[1].job_id] = as_fake_job(real[1])
    elif argv[0] == "sacct":
        cluster["jobs"] = {job_id: as_fake_job(jobs[-1], jobs[:-1])
                           for job_id, jobs in rc.parse_sacct(stdout).items()}
    elif argv[0] == "squeue":
        cluster["jobs"] = {job_id: as_fake_job(job) for job_id, job in real[1].items()}
    elif argv[0] == "sbatch":
        cluster["next_id"] = int(real[1])
        monkeypatch.chdir(tmp_path)
        (tmp_path / argv[-1]).write_text("#!/bin/bash\ntrue\n")
    fake = understood(argv[0], *fake_slurm.respond(argv[0], argv[1:], cluster, 0))
    assert fake == real


@pytest.mark.parametrize("text,expected", [
    ("afternotok:2", "2"), ("afternotok:123(unfulfilled)", "123"), ("afterok:5", None),
    ("afterok:5,afternotok:77", "77"), ("", None), (None, None),
], ids=["plain", "squeue annotation", "other kind", "mixed", "empty", "unset"])
def test_parse_dependency(text, expected):
    assert rc.parse_dependency(text) == expected


@pytest.mark.parametrize("text", ["afternotok:abc", "afternotok:1;touch x", "afternotok:1:2",
                                  "afternotok:", "afternotok:0"])
def test_parse_dependency_rejects_malformed(text):
    with pytest.raises(ValueError):
        rc.parse_dependency(text)

# --------------------------------------------------------------------------- rendering

HOSTILE = ["plain", "with space", "it's", 'dq"uote', "$(touch canary)", "`touch canary`",
           "new\nline", "ünïcødé", "-n", "a\\b", "$HOME", "!!", "*", "~user"]


@pytest.mark.parametrize("text", HOSTILE, ids=[repr(t) for t in HOSTILE])
def test_rendered_prologue_is_valid_quoted_bash(tmp_path, text):
    path = str(tmp_path / text)
    snippet = rc.render_prologue(path, max_retries=2, max_walltime="1-00:00", script=path + ".sh",
                                 sbatch_args=["--comment=" + text, "-J", text], python="python3",
                                 notify="echo " + text)
    script = tmp_path / "check.sh"
    script.write_text("#!/bin/bash\n" + snippet, encoding="utf-8")
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is not installed (.ci/run installs it)")
        pytest.skip("shellcheck not installed")
    check = subprocess.run(["shellcheck", "-s", "bash", str(script)], stdout=subprocess.PIPE,
                           universal_newlines=True)
    assert check.returncode == 0, check.stdout


def test_a_drivers_pathlib_paths_render_as_their_text(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # the budget's cluster: no Slurm answers here
    run_dir, budget = tmp_path / "runs" / "a", tmp_path / "budget"
    with pytest.raises(ValueError, match=re.escape("no shared budget in %s" % budget)):
        rc.render_prologue(run_dir, budget_dir=budget)
    budget.mkdir(mode=0o700)
    rc.set_budget(budget, 3600)
    assert rc.budget_report(budget)["cap"] == 3600
    assert rc.render_prologue(run_dir, script=tmp_path / "job.sh", budget_dir=budget) == \
        rc.render_prologue(str(run_dir), script=str(tmp_path / "job.sh"), budget_dir=str(budget))


def test_rendered_prologue_runs_this_module_by_absolute_path():
    snippet = rc.render_prologue("runs/a", python="/opt/py/bin/python3")
    assert "/opt/py/bin/python3 -I -S -c %s %s prologue" % (shlex.quote(rc.BOOTSTRAP),
                                                       os.path.abspath(rc.__file__)) in snippet
    assert shlex.quote(os.path.abspath("runs/a")) in snippet
    assert '--script="$0"' in snippet


def test_render_takes_an_interpreter_path_with_a_space(tmp_path):
    python = tmp_path / "my envs" / "python3"
    python.parent.mkdir()
    python.write_text("")
    assert "%s -I -S -c" % shlex.quote(str(python)) in rc.render_prologue("runs/a",
                                                                           python=str(python))


@pytest.mark.parametrize("options,message", [
    ({"sbatch_args": ["--dependency=afterok:1"]}, "dependency"),
    ({"sbatch_args": ["-d", "afterok:1"]}, "dependency"),
    ({"sbatch_args": ["--array=1-4"]}, "array"),
    ({"sbatch_args": ["-a1-4"]}, "array"),
    ({"sbatch_args": "-p gpu"}, "list"),
    ({"sbatch_args": iter(["-p", "gpu"])}, "list"),
    ({"max_retries": -1}, "max_retries"),
    ({"max_retries": True}, "max_retries"),
    ({"max_walltime": "0"}, "walltime"),
    ({"python": ""}, "python"),
    ({"python": "python3 -u"}, "one word"),
], ids=["dependency", "short dependency", "array", "short array", "string args",
        "iterator args", "negative retries", "bool retries", "zero walltime", "empty python",
        "python with arguments"])
def test_render_rejects(options, message):
    with pytest.raises(ValueError) as error:
        rc.render_prologue("runs/a", **options)
    assert message in str(error.value)


@pytest.mark.parametrize("lines, named", [
    (["RENDERED"], "/runs/a"),
    (["# was: resumable-chain prologue --max-retries=3 /scratch/old", "RENDERED"], "/runs/a"),
    (["python3 rc.py prologue --max-retries=3 --script=\"$0\" runs/a -- /data/in"], None),
    (["python3 rc.py prologue --max-retries 3 /runs/a -- \"$@\""], None),  # 0.1's words
    (["echo no prologue here"], None),
], ids=["rendered", "a comment before it", "relative, an absolute script argument", "0.1",
        "none"])
def test_the_run_directory_a_scripts_prologue_names(tmp_path, lines, named):
    script = tmp_path / "job.sh"
    rendered = rc.render_prologue(str(tmp_path / "runs" / "a")).replace(str(tmp_path), "")
    script.write_text("#!/bin/bash\n" + "\n".join(lines).replace("RENDERED", rendered) + "\n")
    assert rc.prologue_run_dir(str(script)) == named


def test_a_run_directory_not_in_utf8_is_named_as_the_filesystem_has_it(tmp_path):
    run_dir = os.path.join(os.fsencode(str(tmp_path)), b"run\xffdir")
    script = tmp_path / "job.sh"
    script.write_bytes(b"#!/bin/bash\n" + os.fsencode(rc.render_prologue(os.fsdecode(run_dir))))
    assert rc.prologue_run_dir(str(script)) == os.fsdecode(run_dir)


def test_a_drivers_unset_sbatch_args_are_none(tmp_path, monkeypatch):
    monkeypatch.chdir(str(tmp_path))
    assert rc.render_prologue("runs/a", sbatch_args=None) == rc.render_prologue("runs/a")


def test_main_prints_to_a_drivers_text_stream(tmp_path, monkeypatch):
    """A driver captures main's output with contextlib.redirect_stdout(io.StringIO())."""
    monkeypatch.chdir(str(tmp_path))
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        assert rc.main(["render", "runs/a"]) == 0
    assert captured.getvalue() == rc.render_prologue("runs/a")


def test_cli_render_matches_the_function(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(str(tmp_path))  # render creates the run directory
    assert rc.main(["render", "runs/a", "--max-walltime", "48:00:00", "--", "-p", "gpu"]) == 0
    assert capsys.readouterr().out == rc.render_prologue("runs/a", max_walltime=172800,
                                                         sbatch_args=["-p", "gpu"])


@pytest.mark.parametrize("argv", [["render"], ["render", "d", "--max-walltime", "soon"],
                                  ["bogus"], ["prologue", "d"], ["status", "d", "--", "x"]])
def test_cli_errors_are_one_line(capsys, argv):
    assert rc.main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith("resumable-chain: error:") and error.count("\n") == 1


@pytest.mark.parametrize("command", ["render", "prologue", "status", "cancel"])
def test_cli_help_has_an_example(capsys, command):
    assert rc.main([command, "--help"]) == 0
    assert "example" in capsys.readouterr().out


def test_the_commands_help_says_what_they_do_not_how_the_file_is_laid_out(capsys):
    # New-user trial: resumable-chain --help printed the source's table of contents.
    assert rc.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "self-chaining, resumable sequence" in out and "Contents:" not in out


def test_the_commands_work_without_docstrings(tmp_path):
    # Review: python -OO (or PYTHONOPTIMIZE=2) drops __doc__, and --help split None.
    module = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resumable_chain.py")
    ran = subprocess.run([sys.executable, "-OO", module, "status", str(tmp_path / "none")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                         env=dict(os.environ, PATH="/nonexistent"))
    assert ran.returncode == 2 and ran.stderr.startswith("resumable-chain: error:"), ran.stderr


@pytest.mark.parametrize("text,expected", [
    ("1234\n", "1234"), ("1234;cluster\n", "1234"), ("Submitted batch job 77\n", None),
    ("sbatch: warning: x\n", None), ("", None), ("12 34", None), ("0\n", None),
], ids=["parsable", "with cluster", "not parsable", "warning only", "empty", "two numbers", "zero"])
def test_parse_sbatch_output(text, expected):
    assert parse_sbatch_output(text) == expected


def test_parse_sacct_tolerates_fewer_fields():
    records = rc.parse_sacct("3|FAILED|0|3:0\n5|NODE_FAIL|3\n")
    assert [(r.state, r.elapsed) for r in records["3"]] == [("FAILED", 0)]
    assert rc.summarize_sacct(records["5"]).state == "NODE_FAIL"


def test_settings_read_as_mapping_and_attributes():
    settings = rc.parse_resumable({"max_retries": 5, "max_walltime": "1:00:00"})
    assert settings == {"max_retries": 5, "max_walltime": 3600}
    assert (settings.max_retries, settings["max_walltime"]) == (5, 3600)
    assert "--max-walltime=01:00:00" in rc.render_prologue("runs/a", **settings)
    with pytest.raises(AttributeError):
        settings.bogus


# --------------------------------------------------------------------------- one validator


@pytest.mark.parametrize("value,accepted", [
    (0, True), (1000000, True), (rc.MAX_RETRIES_LIMIT, True), (rc.MAX_RETRIES_LIMIT + 1, False),
    (-1, False), (True, False), (2.5, False), ("3", False)])
def test_max_retries_one_rule_for_every_entry_point(value, accepted):
    entry_points = [lambda: rc.parse_resumable({"max_retries": value}),
                    lambda: rc.render_prologue("runs/a", max_retries=value)]
    if isinstance(value, int) and not isinstance(value, bool):  # the command line takes digits
        entry_points.append(lambda: rc.read_step_words(
            "prologue", ["--max-retries=%d" % value, "--script=s", "d"]))
    for call in entry_points:
        if accepted:
            call()
        else:
            with pytest.raises(ValueError) as error:
                call()
            assert "from 0 to %d" % rc.MAX_RETRIES_LIMIT in str(error.value)


@pytest.mark.parametrize("value", ["0:30", 59, "0:59"])
def test_max_walltime_under_a_minute_is_refused_everywhere(value):
    for call in (lambda: rc.parse_resumable({"max_walltime": value}),
                 lambda: rc.render_prologue("runs/a", max_walltime=value)):
        with pytest.raises(ValueError) as error:
            call()
        assert "1-minute minimum" in str(error.value)


@pytest.mark.parametrize("name", ["run_dir", "script"])
def test_render_prologue_refuses_an_empty_path(tmp_path, name):
    paths = {"run_dir": str(tmp_path / "run"), "script": str(tmp_path / "job.sh"), name: ""}
    with pytest.raises(ValueError) as error:
        rc.render_prologue(paths.pop("run_dir"), **paths)
    assert "%s must be a non-empty path" % name in str(error.value)


@pytest.mark.parametrize("run_dir", [None, "", 3], ids=["None", "empty", "a number"])
def test_chain_status_refuses_what_is_no_path_as_render_prologue_does(run_dir):
    with pytest.raises(ValueError, match="run_dir must be a non-empty path"):
        rc.chain_status(run_dir)


def test_cancel_chain_of_a_pathlib_path_says_what_it_would_of_its_text(tmp_path):
    import pathlib  # the review of the path checks: KeyError: PosixPath(...)
    with pytest.raises(rc.StateError) as error:
        rc.cancel_chain(pathlib.Path(str(tmp_path / "none")))
    assert str(error.value) == "%s does not exist" % (tmp_path / "none")


@pytest.mark.parametrize("call, said", [
    (lambda: rc.cancel_chain(None), "run_dir must be a non-empty path, got None"),
    (lambda: rc.resume_chain(5), "run_dir must be a non-empty path, got 5"),
    (lambda: rc.budget_report(None), "budget_dir must be a non-empty path"),
    (lambda: rc.set_budget(None, "1:00:00"), "budget_dir must be a non-empty path"),
    (lambda: rc.chains_status("runs/a"), "run_dirs must be a list of paths, got 'runs/a'"),
    (lambda: rc.chains_status([5]), "each of run_dirs must be a non-empty path, got 5"),
    (lambda: rc.chain_dirs(None), "paths must be a list of paths, got None"),
    (lambda: rc.submit_chain("runs/a", None, [], []), "script must be a non-empty path"),
    (lambda: rc.submit_chain("runs/a", "job.sh", "abc", []), "script_args must be a list of "
     "at most 1024 words, got 'abc'"),
    (lambda: rc.submit_chain("runs/a", "job.sh", [], [], python=None), "python must be a "
     "non-empty path"),
], ids=["cancel_chain(None)", "resume_chain(5)", "budget_report(None)", "set_budget(None)",
        "chains_status of a string", "chains_status([5])", "chain_dirs(None)", "no script",
        "script_args a string (each character an argument)", "python None"])
def test_a_drivers_wrong_argument_is_a_value_error_in_one_line(tmp_path, monkeypatch, call,
                                                               said):
    """A driver's trial on 24.11: TypeErrors from deep inside; chains_status("p2/a") read four
    chains (p, 2, / and a), submit_chain's script_args "abc" submitted a b c."""
    monkeypatch.chdir(str(tmp_path))
    with open("job.sh", "w") as handle:
        handle.write("#!/bin/bash\ntrue\n")
    with pytest.raises(ValueError) as error:
        call()
    assert said in str(error.value) and "\n" not in str(error.value)
    assert os.listdir(str(tmp_path)) == ["job.sh"]  # nothing made, nothing queued


@pytest.mark.parametrize("place, said", [
    ("runs/a/nested", "is inside the chain in {tmp}/runs/a, where status never looks"),
    ("runs", "holds chains ({tmp}/runs/a): status would show the new one alone"),
], ids=["inside a chain", "above a chain"])
def test_render_prologue_refuses_where_submit_would_and_makes_nothing(tmp_path, place, said):
    """A driver's trial on 24.11: render_prologue() rendered (and made runs/a/nested) where
    submit_chain refuses; each job then failed on its node."""
    os.makedirs(str(tmp_path / "runs" / "a"))
    with open(str(tmp_path / "runs" / "a" / rc.CHAIN_FILE), "w") as handle:
        handle.write("5\n")
    with pytest.raises(ValueError) as error:
        rc.render_prologue(str(tmp_path / place), sbatch_args=["--time=5"])
    assert said.format(tmp=tmp_path) in str(error.value)
    assert sorted(os.listdir(str(tmp_path / "runs" / "a"))) == [rc.CHAIN_FILE]


@pytest.mark.parametrize("argv", [[5], ["status", None], "status runs/a", 5],
                         ids=["a number", "None", "a string", "no list"])
def test_main_refuses_words_that_are_no_strings_in_one_line(argv, capsys):
    assert rc.main(argv) == rc.EXIT_USAGE
    assert capsys.readouterr().err == "resumable-chain: error: argv must be a list of strings, " \
        "got %r\n" % (argv,)


@pytest.mark.parametrize("name", ["run_dir", "script", "budget_dir"])
def test_render_prologue_refuses_a_path_with_a_tilde_no_shell_expanded(tmp_path, monkeypatch,
                                                                       name):
    monkeypatch.chdir(str(tmp_path))
    paths = {"run_dir": str(tmp_path / "run"), name: "~/runs/a"}
    with pytest.raises(ValueError) as error:
        rc.render_prologue(paths.pop("run_dir"), **paths)
    assert str(error.value) == "%s ~/runs/a: only a shell expands ~; give %s" % (
        name, os.path.expanduser("~/runs/a"))
    assert os.listdir(str(tmp_path)) == []  # no directory named ~ made here


def test_cli_render_refuses_what_cannot_work(tmp_path, capsys):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    assert rc.main(["render", str(not_a_dir)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert rc.main(["render", str(tmp_path / "run"), "--script", "/nonexistent.sh"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_cli_render_creates_the_run_directory_for_output_files(tmp_path, capsys):
    run_dir = tmp_path / "runs" / "gpqa"
    assert rc.main(["render", str(run_dir)]) == 0
    assert run_dir.is_dir() and "created the run directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- JSON without json


def _random_value(rng, depth=0):
    kind = rng.randrange(7 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.randrange(-10 ** 13, 10 ** 13)
    if kind == 3:
        return "".join(rng.choice('ab"\\\n\tü€\U0001F600\x00/') for _ in range(rng.randrange(6)))
    if kind == 4:
        return rng.choice(["", "x", "\udcc3"])
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {"k%d" % rng.randrange(9): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_state_json_round_trips_and_keeps_the_bytes_earlier_versions_wrote():
    # 0.2 wrote this journal line; tools that read the files see the same bytes from 0.3 on.
    written = ('{"action": "resume", "job": "12", "next": {"script_args": ["--lr", "3e-4"]}, '
               '"path": "r\\u00fcn \\"dir\\"", "time_limit": null, "x": [true, false, 15]}')
    value = {"job": "12", "action": "resume", "time_limit": None, "x": [True, False, 15],
             "next": {"script_args": ["--lr", "3e-4"]}, "path": 'r\u00fcn "dir"'}
    assert rc.dump_json(value) == written and rc.load_json(written) == value
    rng = random.Random(20261130)
    for _ in range(3000):
        value = _random_value(rng)
        assert rc.load_json(rc.dump_json(value) + "\n") == value


@pytest.mark.parametrize("text", ["", "{", "{}x", "[1,]", "[1, 2", "true false", "NaN",
                                  '{"a": Infinity}', "\x00", "\xa0{}", "{}\xa0"])
def test_state_json_refuses_what_is_not_json(text):
    with pytest.raises(ValueError):
        rc.load_json(text)


def test_render_prologue_takes_run_dir_by_position_and_by_name(tmp_path):
    run_dir = str(tmp_path / "run")
    assert rc.render_prologue(run_dir=run_dir) == rc.render_prologue(run_dir)
    with pytest.raises(TypeError):
        rc.render_prologue(benchmark_dir=run_dir)  # its name before 0.3 is gone


def test_render_prologue_creates_the_run_directory_for_output_files(tmp_path):
    # Slurm opens #SBATCH --output=<run dir>/slurm-%j.out before the prologue runs.
    run_dir = tmp_path / "runs" / "gpqa"
    rc.render_prologue(str(run_dir))
    assert run_dir.is_dir()
    with pytest.raises(ValueError, match="cannot create run directory"):
        rc.render_prologue("/proc/resumable-chain-%d/run" % os.getpid())


def recorded_sbatch_options():
    """({option: {kinds}}, {short option: its long name}) from every release's recordings."""
    kinds, pairs = {}, {}
    for release in RELEASES:
        with open(os.path.join(OUTPUTS, release, "sbatch-options.txt")) as handle:
            for line in handle:
                if not line.startswith("#"):
                    words = line.split()
                    kinds.setdefault(words[0], set()).add(words[1])
                    pairs.update([words[::2]] if len(words) == 3 else [])
    return kinds, pairs


def test_the_sbatch_option_table_is_what_the_recorded_releases_accept():
    kinds, pairs = recorded_sbatch_options()
    assert rc.SBATCH_VALUE_OPTIONS == {name for name, kind in kinds.items() if "value" in kind}
    assert rc.SBATCH_OTHER_OPTIONS == {name for name, kind in kinds.items() if "value" not in kind}
    assert rc.SBATCH_SHORT_NAMES == pairs and pairs["-p"] == "--partition"
    for name in ("--hint", "--wait-all-nodes", "--kill-on-invalid-dep", "--segment", "-J"):
        assert name in rc.SBATCH_VALUE_OPTIONS


@pytest.mark.parametrize("word,expected", [
    ("--part", ("--partition", "--partition", True)),
    ("--part=debug", ("--partition", "--partition=debug", False)),
    ("--arr=1-4", ("--array", "--array=1-4", False)),
    ("--dep", ("--dependency", "--dependency", True)),
    ("--hint", ("--hint", "--hint", True)),
    ("--kill-on-invalid-dep", ("--kill-on-invalid-dep", "--kill-on-invalid-dep", True)),
    ("--exclusive", ("--exclusive", "--exclusive", False)),
    ("--requeue", ("--requeue", "--requeue", False)), ("-p", ("-p", "-p", True)),
    ("-pdebug", ("-p", "-pdebug", False)), ("-H", ("-H", "-H", False)),
    ("--container-image=nvcr.io/x",  # a site plugin's option
     ("--container-image", "--container-image=nvcr.io/x", False)),
], ids=lambda value: value if isinstance(value, str) else "")
def test_resolve_option_reads_options_as_sbatch_does(word, expected):
    assert rc.resolve_option(word) == expected


@pytest.mark.parametrize("word,message", [
    ("--p", "ambiguous option --p: it could be --parsable, --partition"),
    ("--nosuch", "unknown option --nosuch"), ("-Z", "unknown option -Z"),
])
def test_resolve_option_names_an_unknown_or_ambiguous_option(word, message):
    with pytest.raises(ValueError) as error:
        rc.resolve_option(word)
    assert message in str(error.value)


@pytest.mark.parametrize("args,expected", [
    (["-J", "-accuracy-run", "--part=debug"], ["-J", "-accuracy-run", "--partition=debug"]),
    (["--hint", "nomultithread", "--wait-all-nodes", "1"],
     ["--hint", "nomultithread", "--wait-all-nodes", "1"]),
    (["--arr=1-4"], "one chain per task"), (["--dep=afterok:1"], "sets the dependency"),
    (["--ho"], "every successor would wait held"), (["-J"], "needs a value"),
    (["debug"], "is not an option"), (["--test-only"], "queues nothing"),
    (["--time=4h"], "invalid --time '4h'"), (["-t", "abc"], "invalid --time 'abc'"),
    (["--time-min=1h"], "invalid --time-min '1h'"), (["--time="], "invalid --time ''"),
    (["--time=-"], "invalid --time '-'"), (["--time=1--"], "invalid --time '1--'"),
    (["-vH"], "short options one per word (-v -H ..."),  # an attacker's trial: a held successor
    (["-OW"], "short options one per word (-O -W ..."),  # sbatch would wait, then time out
] + [([option], [option]) for option in (  # every form sbatch takes (parse_time.c)
    "--time=30", "--time=5:30", "--time=48:00:00", "--time=1-0", "--time=2-12:00",
    "--time=1-00:00:00", "--time=0", "--time=-1", "--time=UNLIMITED", "--time=infinite",
    "-t1:00:00", "--time-min=10", "--time=2-")])
def test_check_sbatch_args_spells_options_out_and_refuses_what_breaks_a_chain(args, expected):
    if isinstance(expected, list):
        assert rc.check_sbatch_args(args) == expected
        return
    with pytest.raises(ValueError) as error:
        rc.check_sbatch_args(args)
    assert expected in str(error.value)


@pytest.mark.parametrize("release", RELEASES)
def test_sbatch_s_own_error_line_is_kept(release):
    _, status, _, stderr = recorded(release + "/sbatch-unknown-option")
    assert status != 0 and rc.last_line(stderr) == "sbatch: unrecognized option '--nosuch'"


@pytest.mark.parametrize("release,running", [("22.05", "135"), ("24.11", "195"), ("26.05", "135")])
def test_parse_recorded_squeue_reasons(release, running):
    _, _, stdout, _ = recorded(release + "/squeue-reasons")
    assert sorted((job.state, job.reason, job.predecessor) for job in rc.parse_squeue(stdout)) == [
        ("PENDING", "Dependency", running), ("PENDING", "JobHeldUser", None),
        ("RUNNING", None, None)]


@pytest.mark.parametrize("release", ["22.05", "26.05"])
def test_a_job_slurm_held_after_its_launch_failed_reads_as_held_by_slurm(release):
    # Recorded: a job whose node Prolog failed; Slurm requeued it held (squeue's words).
    jobs = rc.parse_squeue(recorded(release + "/squeue-launch-failed-held")[2])
    assert [(job.state, job.reason in rc.HELD_BY_SLURM) for job in jobs] == [("PENDING", True)]


def test_parse_resumable_refuses_a_cap_slurm_cannot_represent():
    assert rc.parse_resumable({"max_walltime": rc.MAX_TIME_LIMIT}).max_walltime == rc.MAX_TIME_LIMIT
    with pytest.raises(ValueError, match="more than Slurm can represent"):
        rc.parse_resumable({"max_walltime": rc.MAX_TIME_LIMIT + 60})


@pytest.mark.parametrize("release", RELEASES)
def test_parse_recorded_exit_codes(release):
    codes = [rc.parse_scontrol(recorded("%s/%s" % (release, name))[2]).exit_code
             for name in ("scontrol-exit-75", "scontrol-exit-76", "scontrol-killed-by-signal")]
    assert codes == ["75:0", "76:0", "0:9"]
    assert [rc.exit_status(code) for code in codes] == [75, 76, None]
    command, _, stdout, _ = recorded(release + "/sacct-exit-codes")
    assert rc.SACCT_FIELDS.startswith(command.split("-o ")[1])  # JobIDRaw, last, came later
    jobs = [jobs[0] for jobs in rc.parse_sacct(stdout).values()]
    assert [(job.state, job.exit_code) for job in jobs] == [
        ("FAILED", "75:0"), ("FAILED", "76:0"), ("FAILED", "0:9")]


@pytest.mark.parametrize("situation,exit_code,walltime,cap,expected", [
    ("progress saved: resume, no retry", "75:0", 10, None, ("resume", 0)),
    ("progress saved but the cap is reached", "75:0", 100, 100, ("stop", 0)),
    ("the work asks to stop", "76:0", 10, None, ("stop", 0)),
    ("killed by a signal is a failure", "0:15", 10, None, ("fail", 1)),
    ("another exit status is a failure", "1:0", 10, None, ("fail", 1)),
    ("no exit code known: as before", None, 10, None, ("fail", 1)),
    ("a driver's int return code 75", 75, 10, None, ("resume", 0)),
    ("a driver's int return code 76", 76, 10, None, ("stop", 0)),
    ("an exit code with a trailing newline", "75:0\n", 10, None, ("resume", 0)),
])
def test_decide_honours_the_works_exit_status(situation, exit_code, walltime, cap, expected):
    decision = decide("FAILED", retries=0, walltime=walltime, max_retries=0, max_walltime=cap,
                      exit_code=exit_code)
    assert decision[:2] == expected
    assert decide("TIMEOUT", exit_code="76:0").action == "resume"  # only a FAILED job's exit


EXIT_75_AFTER = [
    ("exit 75 a second in: no progress, a retry", 1, ("resume", 1)),
    ("exit 75 59 s in: still no progress", 59, ("resume", 1)),
    ("exit 75 after a minute: progress, no retry", 60, ("resume", 0)),
    ("run time not known: no retry, as before", None, ("resume", 0)),
]


@pytest.mark.parametrize("situation, elapsed, expected", EXIT_75_AFTER,
                         ids=[row[0] for row in EXIT_75_AFTER])
def test_decide_counts_an_exit_75_within_a_minute_as_a_retry(situation, elapsed, expected):
    decision = decide("FAILED", exit_code="75:0", elapsed=elapsed)
    assert decision[:2] == expected
    assert ("no progress" in decision.reason) is (expected[1] == 1)


@pytest.mark.parametrize("options, environ, header, expected", [
    ([], {}, "", []),
    (["--export=ALL"], {}, "#SBATCH --export=NONE\n", []),  # the command line wins
    (["--export=NONE"], {}, "", ["--export=NONE,RESUMABLE_CHAIN_NAMED=1"]),
    (["--export", "HOME,PATH"], {}, "", ["--export=HOME,PATH,RESUMABLE_CHAIN_NAMED=1"]),
    ([], {"SBATCH_EXPORT": "NONE"}, "#SBATCH --export=ALL\n",
     ["--export=NONE,RESUMABLE_CHAIN_NAMED=1"]),  # sbatch: the environment over the script
    ([], {}, "#!/bin/bash\n#SBATCH --export=NONE\n", ["--export=NONE,RESUMABLE_CHAIN_NAMED=1"]),
    ([], {"SBATCH_EXPORT": "ALL,FOO=1"}, "", []),
    (["--export=A"], {"SBATCH_EXPORT": "HOME"}, "", ["--export=A,RESUMABLE_CHAIN_NAMED=1"]),
    ([], {}, None, []),  # sbatch says why it cannot read the script
], ids=["whole environment", "ALL over the script's NONE", "--export=NONE", "a list",
        "SBATCH_EXPORT=NONE", "the script's #SBATCH --export=NONE", "ALL with more",
        "the command line over SBATCH_EXPORT", "no script"])
def test_a_named_job_keeps_its_mark_whatever_it_exports(tmp_path, monkeypatch, options, environ,
                                                        header, expected):
    # Seen on 22.05 and 26.05: sbatch --export=NONE,VAR=1 gives the job VAR and no other.
    monkeypatch.delenv("SBATCH_EXPORT", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    script = tmp_path / "job.sh"
    if header is not None:
        script.write_text(header + "true\n")
    assert rc.named_export(options, str(script)) == expected


@pytest.mark.parametrize("caps,left", [
    ({"max_walltime": 600, "walltime": 73}, "527"),
    ({"max_walltime": 600, "walltime": 700}, "0"),
    ({"reserved": 3600, "walltime": 100}, "3600"),  # a shared budget only: its share
    ({"max_walltime": 600, "walltime": 73, "reserved": 480}, "480"),
    ({"walltime": 73}, ""),  # no cap
], ids=["max-walltime", "max-walltime used up", "budget only", "both: the tighter",
        "no cap"])
def test_the_walltime_left_the_work_sees_is_the_tightest_cap(caps, left):
    record = rc.Record(job="100", action="start", link=1, retries=0, **caps)
    assert rc.link_exports(record, "/run")["RESUMABLE_CHAIN_WALLTIME_LEFT"] == left
