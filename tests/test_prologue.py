"""The rendered prologue run by real bash inside a temporary directory, against fake Slurm
commands (tests/fake_slurm.py) that record their argv and environment."""
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

import fake_slurm
import resumable_chain as rc
from fake_cluster import (BASH, BY_PATH, FakeCluster, find_interpreters, read, run_cli,
                          start_chain)
from resumable_chain import NOT_VISIBLE




def test_first_job_starts_and_queues_its_successor(cluster, run_dir):
    script = cluster.write_script(run_dir, max_walltime="1:00:00", sbatch_args=["-p", "gpu"])
    result = cluster.run_link(script, 100, args=["--lr", "3e-4"], SLURM_JOB_PARTITION="gpu",
                              SLURM_JOB_ACCOUNT="proj", SBATCH_GRES="gpu:8", LC_ALL="C.UTF-8")
    assert result.returncode == 0, result.stderr
    assert cluster.work_done() == ["100"]
    assert read(run_dir, rc.CHAIN_FILE) == "100\n"
    assert read(run_dir, rc.WALLTIME_FILE) == "0\n"
    assert read(run_dir, rc.RETRIES_FILE) == "0\n"
    [call] = cluster.calls("sbatch")
    assert call["argv"] == ["--parsable", "--job-name=job.sh", "-p", "gpu", "--dependency=afternotok:100",
                            "--kill-on-invalid-dep=yes", "--no-requeue", script, "--lr", "3e-4"]
    assert call["env"]["SBATCH_GRES"] == "gpu:8"  # the user's defaults apply to links
    # Slurm never requeues the successor (a node Prolog failure would hold it): its guard, the
    # smallest job, runs when it ends and continues the chain if it died before its prologue.
    [guard] = cluster.calls("sbatch", guards=True)[1:]
    assert guard["argv"][:-1] == [
        "--parsable", "--job-name=g:job.sh", "--dependency=afterany:1000", "--requeue",
        "--time=10", "--ntasks=1", "--cpus-per-task=1", "--mem=256M", "--chdir=" + run_dir,
        "--open-mode=append", "--output=" + os.path.join(run_dir, rc.GUARD_LOG), "--export=ALL",
        "--partition=gpu", "--account=proj", "--wrap"]
    assert "SBATCH_GRES" not in guard["env"]  # never the links' GPUs; the links it may queue
    assert guard["env"][rc.KEPT_SBATCH + "GRES"] == "gpu:8"  # get them back from its environment
    assert guard["env"]["LC_ALL"] == "C.UTF-8"  # and the user's locale (never C: the work's)
    assert shlex.split(guard["argv"][-1])[-4:] == ["guard", run_dir, "1000", "--after=100"]
    assert "gpu:8" not in " ".join(guard["argv"])  # a command line anyone may read (SubmitLine)
    assert cluster.guards() == {"1000": "900000"}
    assert json.loads(read(run_dir, rc.JOURNAL_FILE))["guard"] == "900000"
    # The guard is the one healer: no job's requeue flag is touched.
    assert cluster.job(1000)["requeue"] == "0"
    assert [call for call in cluster.calls("scontrol") if call["argv"][:1] == ["update"]] == []
    assert cluster.calls("sacct") == []
    assert "resumable-chain: job 100: start | predecessor none (first job)" in result.stderr
    assert "successor 1000" in result.stderr


@pytest.mark.parametrize("time_line, sbatch_args, environ, warned", [
    ("#SBATCH --time=10", [], {}, False),  # the script's own limit: every link's
    ("#SBATCH -t 10", [], {}, False),
    ("", ["--time=10"], {}, False),  # render's options after --: every successor's
    ("", [], {"SBATCH_TIMELIMIT": "10"}, False),  # sbatch's default, in every link's environment
    ("", [], {}, True),  # sbatch --time=10 job.sh: that --time is the first job's alone
], ids=["script", "script-short", "prologue-options", "sbatch-environment", "command-line-only"])
def test_a_first_job_warns_when_no_time_limit_reaches_its_successors(
        cluster, run_dir, time_line, sbatch_args, environ, warned):
    """Named as the user knows it: $0 is Slurm's spool copy (a new user's trial on 22.05)."""
    script = cluster.write_script(run_dir, sbatch_args=sbatch_args)
    with open(script) as handle:
        text = handle.read().replace("#SBATCH --time=10\n", time_line and time_line + "\n")
    with open(script, "w") as handle:
        handle.write(text)
    result = cluster.run_link(script, 100, **environ)
    assert result.returncode == 0, result.stderr
    said = "no --time in this job's #SBATCH lines or in the prologue's sbatch options"
    assert (said in result.stderr) == warned, result.stderr
    assert cluster.work_done() == ["100"]  # a warning, never a refusal


@pytest.mark.parametrize("time_line, environ, warned", [
    ("", {}, "runs up to sbatch's --time or the partition's default"),  # before 23.02
    ("", {"SLURM_JOB_START_TIME": "1000", "SLURM_JOB_END_TIME": str(1000 + 2 * 86400)},
     "runs up to 2-00:00:00"),  # the partition's default (24.11 trial: UNLIMITED, 365 days)
    ("", {"SLURM_JOB_START_TIME": "1000", "SLURM_JOB_END_TIME": "1060"}, None),  # sbatch --time=1
    ("#SBATCH --time=1", {}, None),
], ids=["limit not known", "the partition's default", "sbatch's --time as short", "script"])
def test_a_first_job_warns_when_the_prologues_time_limits_its_successors_alone(
        cluster, run_dir, time_line, environ, warned):
    """render DIR -- --time=1 with no #SBATCH --time: the successors ran a minute, the first job
    365 days, and no line said so (the README read as if both were the same)."""
    script = cluster.write_script(run_dir, sbatch_args=["--time=1"])
    with open(script) as handle:
        text = handle.read().replace("#SBATCH --time=10\n", time_line and time_line + "\n")
    with open(script, "w") as handle:
        handle.write(text)
    result = cluster.run_link(script, 100, **environ)
    assert result.returncode == 0 and cluster.work_done() == ["100"], result.stderr
    said = "--time=1 in the prologue's sbatch options limits the successors alone"
    assert (said in result.stderr) == bool(warned), result.stderr
    assert warned is None or "%s; put #SBATCH --time=1 in the script" % warned in result.stderr


LINKS = [
    # situation: (predecessor state, its elapsed s), (retries before, max_retries, max_walltime),
    #            (exit status, works and queues a successor, walltime after, retries after)
    ("timeout resumes", ("TIMEOUT", 73), (0, 3, None), (0, True, 73, 0)),
    ("preempted resumes", ("PREEMPTED", 3), (2, 3, None), (0, True, 3, 2)),
    ("node fail resumes", ("NODE_FAIL", 3), (0, 3, None), (0, True, 3, 0)),
    ("completed ends the chain", ("COMPLETED", 2), (0, 3, None), (0, False, 2, 0)),
    ("user cancel stops", ("CANCELLED by 0", 2), (0, 3, None), (0, False, 2, 0)),
    ("failed counts a retry", ("FAILED", 0), (0, 3, None), (0, True, 0, 1)),
    ("out of memory counts a retry", ("OUT_OF_MEMORY", 5), (1, 3, None), (0, True, 5, 2)),
    ("failed at max_retries fails", ("FAILED", 0), (3, 3, None), (1, False, 0, 4)),
    ("failed with max_retries 0", ("FAILED", 0), (0, 0, None), (1, False, 0, 1)),
    ("timeout at max_walltime stops", ("TIMEOUT", 60), (0, 3, 60), (0, False, 60, 0)),
    ("timeout a minute under max_walltime", ("TIMEOUT", 140), (0, 3, 200), (0, True, 140, 0)),
    ("timeout under a minute left stops", ("TIMEOUT", 141), (0, 3, 200), (0, False, 141, 0)),
    ("failure with under a minute left stops", ("FAILED", 141), (0, 3, 200), (0, False, 141, 1)),
]


@pytest.mark.parametrize("situation,predecessor,before,expected", LINKS,
                         ids=[row[0] for row in LINKS])
def test_second_link(cluster, run_dir, situation, predecessor, before, expected):
    (state, elapsed), (retries, max_retries, max_walltime) = predecessor, before
    status, works, walltime_after, retries_after = expected
    script, successor = start_chain(cluster, run_dir, max_retries=max_retries,
                                    max_walltime=max_walltime)
    with open(os.path.join(run_dir, rc.RETRIES_FILE), "w") as handle:
        handle.write("%d\n" % retries)
    cluster.finish(100, state, elapsed)
    first_links_calls = len(cluster.calls("scontrol"))
    result = cluster.run_link(script, successor, predecessor=100, args=["--lr", "3e-4"])
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr
    assert cluster.work_done() == (["100", successor] if works else ["100"])
    assert len(cluster.calls("sbatch")) == (2 if works else 1)
    assert read(run_dir, rc.CHAIN_FILE) == ("100\n%s\n" % successor if works else "100\n")
    assert int(read(run_dir, rc.WALLTIME_FILE)) == walltime_after
    assert int(read(run_dir, rc.RETRIES_FILE)) == retries_after
    assert cluster.calls("sacct") == []  # the controller still knows a job that just ended
    calls = [call["argv"] for call in cluster.calls("scontrol")][first_links_calls:]
    # A link that works queues its successor's guard and cancels its own (the first job's); one
    # that ends the chain cancels its own. Guarded, it is never requeued (no Requeue=0 call).
    assert cluster.guards() == ({cluster.pending()[-1]: "900001"} if works else {})
    assert cluster.job("900000")["state"].startswith("CANCELLED")
    assert not [call for call in calls if call[0] == "update" and "Requeue=0" in call]
    assert calls.count(["show", "job", "-o", "100"]) == 1
    line = [l for l in result.stderr.splitlines() if l.startswith("resumable-chain: job %s" % successor)]
    # The controller answered: it shows the base state (sacct adds "by <uid>" for status).
    assert len(line) == 1 and ("predecessor 100 %s" % rc.base_state(state)) in line[0]
    assert "retries %d/%d" % (retries_after, max_retries) in line[0]


def test_timeouts_accumulate_walltime_until_the_cap_stops_the_chain(cluster, run_dir):
    script, link = start_chain(cluster, run_dir, max_walltime=230)
    previous = "100"
    for elapsed in (73, 87):
        cluster.finish(previous, "TIMEOUT", elapsed)
        result = cluster.run_link(script, link, predecessor=previous)
        assert result.returncode == 0, result.stderr
        previous, link = link, cluster.pending()[-1]
    assert read(run_dir, rc.WALLTIME_FILE) == "160\n"
    assert cluster.job(previous)["time_limit"] == "1"  # 70 s left: clamped to whole minutes
    assert "time limit lowered to 1 min" in result.stderr
    cluster.finish(previous, "TIMEOUT", 70)
    result = cluster.run_link(script, link, predecessor=previous)
    assert result.returncode == 0, result.stderr
    assert read(run_dir, rc.WALLTIME_FILE) == "230\n"
    assert cluster.work_done() == ["100", "1000", "1001"]
    assert cluster.pending() == []
    assert "reached max_walltime 230" in result.stderr


def test_time_limit_is_not_raised_or_touched_when_it_fits(cluster, run_dir):
    script = cluster.write_script(run_dir, max_walltime="10:00:00")
    assert cluster.run_link(script, 100).returncode == 0
    # before 23.02 (no SLURM_JOB_END_TIME) the prologue of a capped link asks for its limit,
    # and the background step before it would lower it: no TimeLimit
    assert [c["argv"] for c in cluster.calls("scontrol")] == [["show", "job", "-o", "100"]] * 2
    script = cluster.write_script(run_dir + "2", max_walltime="0:30:00")
    assert cluster.run_link(script, 200).returncode == 0
    updates = [c["argv"] for c in cluster.calls("scontrol") if c["argv"][:2] == [
        "update", "JobId=200"]]
    assert updates == [["update", "JobId=200", "TimeLimit=30"]]


def test_a_capped_link_that_ended_before_its_background_step_is_not_clamped(cluster, run_dir):
    """Its work was quicker than the step: no update, no warning ('cannot lower job N's time
    limit (Job has already finished)' in every fast capped link's log, new-user trial)."""
    script = cluster.write_script(run_dir, max_walltime="0:30:00")
    cluster.set_job(300, state="COMPLETED", start="2026-11-30T01:00:00")
    result = cluster.run_link(script, 300, mark_running=False)
    assert result.returncode == 0, result.stderr
    assert not [c for c in cluster.calls("scontrol") if c["argv"][0] == "update"]
    assert "cannot lower" not in result.stderr, result.stderr


def test_successor_sbatch_drops_stale_slurm_variables(cluster, run_dir):
    script = cluster.write_script(run_dir)
    result = cluster.run_link(script, 100, SLURM_MEM_PER_NODE="123", SLURM_CPU_BIND="none",
                              SLURM_CONF="/etc/slurm/slurm.conf", SBATCH_PARTITION="gpu",
                              SLURM_NTASKS="4", SLURM_TIME_FORMAT="relative")
    assert result.returncode == 0, result.stderr
    [call] = cluster.calls("sbatch")
    assert call["env"] == {"SLURM_CONF": "/etc/slurm/slurm.conf", "SBATCH_PARTITION": "gpu"}
    assert call["cwd"] == cluster.root


def test_lookup_waits_for_accounting_lag(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 73)
    cluster.set_job(100, sacct_hidden_calls=2, in_controller=False)
    result = cluster.run_link(script, successor, predecessor=100, RESUMABLE_CHAIN_LOOKUP_SECONDS=10)
    assert result.returncode == 0, result.stderr
    assert len(cluster.calls("sacct")) == 3
    shows = [call for call in cluster.calls("scontrol") if call["argv"][0] == "show"]
    assert len(shows) == 1  # the controller said it forgot the job: asked once
    assert read(run_dir, rc.WALLTIME_FILE) == "73\n"


def test_lookup_treats_running_as_lag(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "FAILED", 5)
    cluster.set_job(100, sacct_hidden_calls=1, sacct_lag_state="RUNNING", in_controller=False)
    result = cluster.run_link(script, successor, predecessor=100, RESUMABLE_CHAIN_LOOKUP_SECONDS=5)
    assert result.returncode == 0, result.stderr
    assert read(run_dir, rc.RETRIES_FILE) == "1\n"
    assert len(cluster.calls("sacct")) == 2


def test_controller_answers_while_accounting_lags(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 73)
    cluster.set_job(100, sacct_hidden_calls=100)
    result = cluster.run_link(script, successor, predecessor=100, RESUMABLE_CHAIN_LOOKUP_SECONDS=30)
    assert result.returncode == 0, result.stderr
    assert len(cluster.calls("sacct")) == 0
    assert read(run_dir, rc.WALLTIME_FILE) == "73\n"
    assert "from scontrol" in result.stderr


CONTROLLER_CASES = [
    # (situation, what the controller shows, sacct calls, walltime after, source)
    ("final state: no accounting query", {}, 0, 73, "scontrol"),
    ("requeued: accounting sums every run", {"runs": [{
        "state": "REQUEUED", "elapsed": 20, "submit": "2026-11-29T23:59:00",
        "start": "2026-11-29T23:59:40", "end": "2026-11-30T00:00:00"}]},
     1, 93, "sacct"),
    ("not final yet: accounting decides", {"state": "COMPLETING"}, 1, 73, "sacct"),
    ("forgotten (MinJobAge): accounting decides", {"in_controller": False}, 1, 73, "sacct"),
]


@pytest.mark.parametrize("situation,controller,sacct_calls,walltime,source", CONTROLLER_CASES,
                         ids=[case[0] for case in CONTROLLER_CASES])
def test_controller_first_accounting_when_it_must(cluster, run_dir, situation, controller,
                                                  sacct_calls, walltime, source):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 73)
    cluster.set_job(100, **controller)
    if controller.get("state") == "COMPLETING":  # sacct already has the final record
        cluster.set_job(100, sacct_lag_state=None)
        fake = cluster.load()
        fake["jobs"]["100"]["state"] = "COMPLETING"
        fake["jobs"]["100"]["sacct_state"] = "TIMEOUT"
        cluster.save(fake)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 0, result.stderr
    assert len(cluster.calls("sacct")) == sacct_calls
    assert read(run_dir, rc.WALLTIME_FILE) == "%d\n" % walltime
    assert "from %s" % source in result.stderr


EARLY_LOOKUPS = [
    # (situation, what the controller shows, the dependency, by the module, sacct calls)
    ("the controller knows it: the prologue asked", {}, "afternotok:100", False, 0),
    ("forgotten (MinJobAge): the prologue asked, then accounting", {"in_controller": False},
     "afternotok:100", False, 1),
    ("a dependency the prologue does not read: the step asks", {}, "afternotok:100(unfulfilled)",
     True, 0),
]


@pytest.mark.parametrize("situation,controller,dependency,by_module,sacct_calls", EARLY_LOOKUPS,
                         ids=[case[0] for case in EARLY_LOOKUPS])
def test_the_predecessor_is_asked_for_once_as_python_starts(cluster, run_dir, situation,
                                                             controller, dependency, by_module,
                                                             sacct_calls):
    # The prologue starts scontrol before Python (about 4 ms of each link): the same question,
    # in the environment run_slurm gives; run_slurm runs each command in a session of its own.
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 73)
    cluster.set_job(100, **controller)
    result = cluster.run_link(script, successor, SLURM_JOB_DEPENDENCY=dependency,
                              SLURM_CONF="/etc/slurm/slurm.conf", SLURM_MEM_PER_NODE="123",
                              SACCT_FORMAT="JobID", SBATCH_PARTITION="gpu",
                              RESUMABLE_CHAIN_NAMED="1", SLURM_TIME_FORMAT="relative")
    assert result.returncode == 0, result.stderr
    assert read(run_dir, rc.WALLTIME_FILE) == "73\n"
    [call] = [call for call in cluster.calls("scontrol") if call["argv"][0] == "show"]
    assert (call["argv"], call["own_session"]) == (["show", "job", "-o", "100"], by_module)
    assert call["env"] == {"SLURM_CONF": "/etc/slurm/slurm.conf", "LC_ALL": "C"}
    assert len(cluster.calls("sacct")) == sacct_calls


SHELLS = [
    # (situation, the script's #! line, the shell Slurm runs it with, the prologue asks early)
    ("bash", "#!/bin/bash", (BASH,), True),
    ("sh, dash on Debian: the step asks", "#!/bin/sh", ("/bin/sh",), False),
    ("bash --posix (sh on RHEL): the step asks", "#!/bin/sh", (BASH, "--posix"), False),
]


@pytest.mark.parametrize("situation,shebang,shell,early", SHELLS,
                         ids=[case[0] for case in SHELLS])
def test_every_shell_of_a_job_script_runs_its_links(cluster, run_dir, situation, shebang, shell,
                                                    early):
    # The early lookup is bash's (process substitution, ${!PREFIX@}): sh never parses it.
    script = cluster.write_script(run_dir, shebang=shebang)
    assert cluster.run_link(script, 100, shell=shell).returncode == 0
    successor = cluster.pending()[-1]
    cluster.finish(100, "TIMEOUT", 73)
    result = cluster.run_link(script, successor, predecessor=100, shell=shell)
    assert result.returncode == 0, result.stderr
    assert cluster.work_done() == ["100", successor]
    [call] = [call for call in cluster.calls("scontrol") if call["argv"][0] == "show"]
    assert call["own_session"] is not early  # run_slurm's commands run in a session of their own


def test_a_hanging_early_lookup_is_killed_at_its_timeout(tmp_path):
    hanging = subprocess.Popen([BASH, "-c", 'echo "$BASHPID"; exec sleep 60'],
                               stdout=subprocess.PIPE)
    started = time.time()
    answer = rc._read_lookup("/dev/fd/%d" % hanging.stdout.fileno(), "100", 0.5)
    assert answer == (None, "", "scontrol timed out after 0.5 s")
    assert hanging.wait(timeout=5) == -9 and time.time() - started < 5


@pytest.mark.parametrize("outage", ["sacct_down", "hidden"])
def test_not_visible_resumes_without_a_retry(cluster, run_dir, outage):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "FAILED", 5)
    cluster.set_job(100, in_controller=False, sacct_hidden_calls=10 ** 6)
    if outage == "sacct_down":
        cluster.update(sacct_down=True)
    result = cluster.run_link(script, successor, predecessor=100, RESUMABLE_CHAIN_LOOKUP_SECONDS=1)
    assert result.returncode == 0, result.stderr
    assert cluster.work_done() == ["100", successor]
    assert read(run_dir, rc.RETRIES_FILE) == "0\n"
    assert "NOT_VISIBLE" in result.stderr
    assert ("Problem talking to the database" if outage == "sacct_down" else "no record") in result.stderr
    assert 2 <= len(cluster.calls("sacct")) <= 3


def test_sbatch_failure_warns_and_work_continues(cluster, run_dir):
    cluster.update(sbatch_error="Batch job submission failed: Invalid account or account/partition combination specified")
    script = cluster.write_script(run_dir)
    result = cluster.run_link(script, 100)
    assert result.returncode == 0
    assert "Chain will NOT continue on failure until one is queued" in result.stderr
    assert "Invalid account" in result.stderr
    assert cluster.work_done() == ["100"]


def test_a_first_job_whose_successor_sbatch_failed_is_guarded_and_its_guard_queues_it(
        cluster, run_dir):
    # One healer: no retrier beside the work; the job's own guard queues the successor when the
    # job ends (its dependency on the ended job is met at once).
    script = cluster.write_script(run_dir)
    cluster.update(sbatch_link_error="Batch job submission failed: Socket timed out on send/recv "
                                     "operation")
    result = cluster.run_link(script, 100)
    assert result.returncode == 0 and cluster.work_done() == ["100"]
    assert cluster.pending() == [] and cluster.guards() == {"100": "900000"}
    assert rc.StateStore(run_dir).read_record().guarded_by == "900000"
    cluster.update(sbatch_link_error=None)  # the controller answers again
    cluster.finish(100, "TIMEOUT", 60)
    result = cluster.run_guard(100)
    assert result.returncode == 0, result.stderr
    [successor] = cluster.pending()
    assert "job 100 ended TIMEOUT before it queued its successor" in result.stderr
    # held, then released once journaled; no dependency (Slurm may have forgotten job 100)
    queued = cluster.job(successor)
    assert (queued["dependency"], queued["held"]) == ("", False)
    assert cluster.calls("sbatch")[-1]["env"][rc.NAMED_ENV] == "1"
    assert cluster.guards() == {successor: "900001"}
    result = cluster.run_link(script, successor, RESUMABLE_CHAIN_NAMED="1")
    assert result.returncode == 0 and "resume | predecessor 100 TIMEOUT" in result.stderr


@pytest.mark.parametrize("error,verdict,fails", [
    ("Socket timed out on send/recv operation", "waiting: job 100 ended TIMEOUT and its successor "
     "could not be queued (sbatch: error: Batch job submission failed: Socket timed out on "
     "send/recv operation); its guard 900000 (PENDING) continues the chain", 0),
    ("Invalid partition name specified", "broken: job 100 ended TIMEOUT and its successor could "
     "not be queued (sbatch: error: Batch job submission failed: Invalid partition name "
     "specified)", 1),
], ids=["a retry may queue it: its guard continues the chain",
        "refused options: no retry of its guard queues it, broken at once"])
def test_status_of_an_ended_link_whose_successor_sbatch_failed(cluster, run_dir, capsys,
                                                               monkeypatch, error, verdict, fails):
    # A trial on 24.11: "Invalid partition name" read "waiting ... its guard continues the
    # chain" (status --check 0) for the 4 minutes its guard retried the same options.
    script = cluster.write_script(run_dir)
    cluster.update(sbatch_link_error="Batch job submission failed: " + error)
    assert cluster.run_link(script, 100).returncode == 0
    cluster.finish(100, "TIMEOUT", 60)
    assert cluster.guards() == {"100": "900000"}
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check")
    assert status == fails and "verdict: %s\n" % verdict in out, out


@pytest.mark.parametrize("strict", [True, False], ids=["set -euo pipefail", "plain bash"])
@pytest.mark.parametrize("state,status,works", [("TIMEOUT", 0, True), ("COMPLETED", 0, False),
                                                ("FAILED", 1, False)])
def test_exit_status_with_and_without_strict_mode(cluster, run_dir, strict, state, status, works):
    script, successor = start_chain(cluster, run_dir, strict=strict, max_retries=0)
    cluster.finish(100, state, 1)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == status
    assert (successor in cluster.work_done()) == works


CORRUPT = [
    ("garbage retries", rc.RETRIES_FILE, "lots\n"),
    ("negative walltime", rc.WALLTIME_FILE, "-5\n"),
    ("empty retries", rc.RETRIES_FILE, ""),
    ("huge walltime", rc.WALLTIME_FILE, "1" + "0" * 30 + "\n"),
    ("non-utf8 retries", rc.RETRIES_FILE, b"\xff\xfe1"),
    ("garbage chain", rc.CHAIN_FILE, "100\nhello\n"),
    ("empty chain", rc.CHAIN_FILE, ""),
    ("directory", rc.RETRIES_FILE, None),
    ("garbage journal", rc.JOURNAL_FILE, "{not json"),
]


@pytest.mark.parametrize("name,content", [r[1:] for r in CORRUPT], ids=[r[0] for r in CORRUPT])
@pytest.mark.parametrize("link", ["first", "second"])
def test_corrupt_state_stops_without_work(cluster, run_dir, name, content, link):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 73)
    path = os.path.join(run_dir, name)
    if os.path.exists(path):
        os.unlink(path)
    if content is None:
        os.mkdir(path)
    else:
        with open(path, "wb") as handle:
            handle.write(content if isinstance(content, bytes) else content.encode())
    before = {p: (open(p, "rb").read() if os.path.isfile(p) else None)
              for p in glob.glob(os.path.join(run_dir, ".*"))}
    if link == "first":
        result = cluster.run_link(script, 200)
    else:
        result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 2
    assert path in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert cluster.work_done() == ["100"]
    assert len(cluster.calls("sbatch")) == 1
    after = {p: (open(p, "rb").read() if os.path.isfile(p) else None) for p in before}
    assert after == before


def test_restarted_job_neither_recounts_nor_queues_twice(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "FAILED", 40)
    first = cluster.run_link(script, successor, predecessor=100)
    assert first.returncode == 0, first.stderr
    again = cluster.run_link(script, successor, predecessor=100, SLURM_RESTART_COUNT=1)
    assert again.returncode == 0, again.stderr
    assert len(cluster.calls("sbatch")) == 2
    assert read(run_dir, rc.WALLTIME_FILE) == "40\n"
    assert read(run_dir, rc.RETRIES_FILE) == "1\n"
    assert read(run_dir, rc.CHAIN_FILE) == "100\n%s\n" % successor
    assert "not counted again" in again.stderr
    assert cluster.work_done() == ["100", successor, successor]


def test_restarted_first_job_keeps_its_chain_and_its_work_resumes(cluster, run_dir):
    script = cluster.write_script(run_dir, work='echo "$RESUMABLE_CHAIN_RESUMING" >> "$WORKLOG.r"\n')
    assert cluster.run_link(script, 100).returncode == 0
    successor = cluster.pending()[-1]
    again = cluster.run_link(script, 100, SLURM_RESTART_COUNT=1)  # a requeue (--requeue, admin)
    assert again.returncode == 0, again.stderr
    assert cluster.pending() == [successor]
    assert read(run_dir, rc.CHAIN_FILE) == "100\n"
    with open(cluster.worklog + ".r") as handle:  # its first run's work may have saved a part
        assert handle.read() == "0\n1\n"


def test_duplicate_link_is_refused(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 10)
    assert cluster.run_link(script, successor, predecessor=100).returncode == 0
    duplicate = cluster.run_link(script, 4242, predecessor=100)
    assert duplicate.returncode == 2
    assert "duplicate" in duplicate.stderr
    assert cluster.work_done() == ["100", successor]
    assert len(cluster.calls("sbatch")) == 2


def test_an_array_task_works_and_its_successor_is_the_same_task(cluster, run_dir):
    script = cluster.write_script(run_dir)  # tests/test_arrays.py: sweeps, %a
    result = cluster.run_link(script, 100, SLURM_ARRAY_JOB_ID=99, SLURM_ARRAY_TASK_ID=1)
    assert result.returncode == 0 and cluster.work_done() == ["100"], result.stderr
    [successor] = cluster.pending()
    assert cluster.job(successor)["array"] == "1"


@pytest.mark.parametrize("dependency", ["afternotok:12;touch canary", "afternotok:$(touch canary)",
                                        "afternotok:abc"])
def test_malformed_predecessor_never_reaches_slurm(cluster, run_dir, dependency):
    script = cluster.write_script(run_dir)
    cluster.set_job(100, state="RUNNING")
    result = subprocess.run([BASH, script], env=cluster.env(100, dependency), cwd=cluster.root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert result.returncode == 2 and "malformed" in result.stderr
    assert cluster.calls() == [] and cluster.work_done() == []
    assert not os.path.exists(os.path.join(cluster.root, "canary"))


HOSTILE_NAMES = ["with space", "it's", 'dq"uote', "$(touch canary)", "`touch canary`",
                 "new\nline", "ünïcødé", "-dash", "semi;touch canary"]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=[repr(n) for n in HOSTILE_NAMES])
def test_odd_run_dir_names_work_and_never_execute(cluster, tmp_path, name):
    run_dir = str(tmp_path / name)
    script, successor = start_chain(cluster, run_dir, sbatch_args=["--comment=$(touch canary)"])
    cluster.finish(100, "TIMEOUT", 7)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 0, result.stderr
    assert read(run_dir, rc.CHAIN_FILE) == "100\n%s\n" % successor
    assert not glob.glob(str(tmp_path / "**" / "canary"), recursive=True)
    assert cluster.calls("sbatch")[-1]["argv"][2] == "--comment=$(touch canary)"


def test_not_in_a_job(cluster, run_dir):
    script = cluster.write_script(run_dir)
    result = subprocess.run([BASH, script], env=cluster.env(), cwd=cluster.root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert result.returncode == 2 and "SLURM_JOB_ID" in result.stderr
    assert cluster.work_done() == []


def test_missing_run_dir_for_a_resuming_job(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 7)
    for path in glob.glob(os.path.join(run_dir, ".*")):
        os.unlink(path)
    os.rmdir(run_dir)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 2 and "missing" in result.stderr
    assert not os.path.exists(run_dir)
    assert len(cluster.calls("sbatch")) == 1


# --------------------------------------------------------------------------- interpreters


def test_in_job_step_on_every_python(tmp_path):
    interpreters = find_interpreters()
    if len(interpreters) < 4:
        message = ("only %s found; this test needs four or more CPythons 3.6-3.13 (pyenv install "
                   "3.6 3.8 3.11 3.13, or Debian/Ubuntu python3.X packages)" % sorted(interpreters))
        if os.environ.get("RESUMABLE_CHAIN_REQUIRE_PYTHONS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    for version, python in sorted(interpreters.items()):
        cluster = FakeCluster(str(tmp_path / version), python=python)
        run_dir = str(tmp_path / version / "run")
        script = cluster.write_script(run_dir)
        assert cluster.run_link(script, 100).returncode == 0
        cluster.finish(100, "FAILED", 9)
        result = cluster.run_link(script, 1000, predecessor=100)
        assert result.returncode == 0, (version, result.stderr)
        assert "retries 1/3" in result.stderr, version
        assert cluster.work_done() == ["100", "1000"], version
        check = subprocess.run([python, "-c", "import resumable_chain as r; "
                                "print(r.decide('TIMEOUT', walltime=5, max_walltime=5).action)"],
                               cwd=os.path.dirname(rc.__file__), stdout=subprocess.PIPE,
                               universal_newlines=True)
        assert check.stdout.strip() == "stop", version
    print("in-job step passed on: %s" % ", ".join(sorted(interpreters)))

# --------------------------------------------------------------------------- lookup schedule


class FakeClock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.mark.parametrize("job,state,over", [
    ({"state": "RUNNING", "elapsed": 5}, "RUNNING", False),
    ({"state": "TIMEOUT", "elapsed": 60}, "TIMEOUT", True),
    ({"state": "TIMEOUT", "elapsed": 60, "in_controller": False}, "TIMEOUT", True),
    (None, None, True),  # forgotten, and no accounting: the controller forgets only ended jobs
], ids=["running", "ended", "forgotten, in accounting", "forgotten, not in accounting"])
def test_how_a_job_ended_is_the_controllers_answer_then_accountings(tmp_path, monkeypatch, job,
                                                                    state, over):
    path = str(tmp_path / "cluster.json")
    fake_slurm.save(path, {"jobs": {"7": job} if job else {}})
    monkeypatch.setattr(rc, "run_slurm", fake_slurm.InProcess(path))
    found = rc.SLURM.final("7")
    assert (found and found.state, rc.job_over("7")) == (state, over)


@pytest.mark.parametrize("window,visible_at,expected_state,max_calls", [
    (60, None, NOT_VISIBLE, 12),
    (60, 2.0, "TIMEOUT", 5),
    (0, None, NOT_VISIBLE, 1),
], ids=["never visible", "visible after 2 s", "no window"])
def test_lookup_backoff_bounds_sacct_calls(tmp_path, monkeypatch, window, visible_at,
                                           expected_state, max_calls):
    clock, path = FakeClock(), str(tmp_path / "cluster.json")
    fake_slurm.save(path, {"jobs": {"7": {  # the controller forgot it; accounting lags
        "state": "TIMEOUT", "elapsed": 60, "in_controller": False,
        "visible_at": 10 ** 9 if visible_at is None else visible_at}}})
    monkeypatch.setattr(rc, "run_slurm", fake_slurm.InProcess(path, clock=clock))
    found = rc.observe_predecessor("7", window=window, sleep=clock.sleep, clock=clock)
    with open(path + ".calls") as handle:
        calls = [(call["command"], call["time"]) for call in map(json.loads, handle)]
    sacct_times = [when for command, when in calls if command == "sacct"]
    assert found.job.state == expected_state
    assert len(sacct_times) <= max_calls and sacct_times[-1] <= window
    assert [command for command, _ in calls].count("scontrol") == 1  # forgotten: asked once
    if visible_at is not None:
        assert sacct_times[-1] - visible_at <= 1.0

# --------------------------------------------------------------------------- what the work learns

EXPORTS = ('for name in "${!RESUMABLE_CHAIN_@}"; do printf "%s=%s\\n" "$name" "${!name}"; done '
           '>> "$WORKLOG.env"; echo --- >> "$WORKLOG.env"\n')


def exported(cluster):
    with open(cluster.worklog + ".env") as handle:
        blocks = handle.read().split("---\n")[:-1]
    settings = (rc.LOOKUP_SECONDS_ENV, rc.COMMAND_TIMEOUT_ENV, rc.VIEW_WAIT_ENV)  # the test's
    return [dict(line.split("=", 1) for line in block.splitlines()
                 if line.split("=", 1)[0] not in settings) for block in blocks]


def test_the_work_learns_the_chain_from_exported_variables(cluster, run_dir):
    script = cluster.write_script(run_dir, max_walltime="10:00", work=EXPORTS)
    # As Slurm 23.02+ sets them: its time limit (#SBATCH --time=10) from its start.
    assert cluster.run_link(script, 100, SLURM_JOB_START_TIME=1000,
                            SLURM_JOB_END_TIME=1600).returncode == 0
    cluster.finish(100, "TIMEOUT", 73)
    assert cluster.run_link(script, 1000, predecessor=100, SLURM_JOB_START_TIME=5000,
                            SLURM_JOB_END_TIME=5600, RESUMABLE_CHAIN_NAMED="1").returncode == 0
    first, second = exported(cluster)  # NAMED (a guard or resume queued it) is not passed on
    assert first == {
        "RESUMABLE_CHAIN_DIR": os.path.abspath(run_dir), "RESUMABLE_CHAIN_JOB": "100",
        "RESUMABLE_CHAIN_LINK": "1", "RESUMABLE_CHAIN_RESUMING": "0",
        "RESUMABLE_CHAIN_PREDECESSOR": "", "RESUMABLE_CHAIN_SUCCESSOR": "1000",
        "RESUMABLE_CHAIN_WALLTIME_USED": "0", "RESUMABLE_CHAIN_WALLTIME_LEFT": "600",
        "RESUMABLE_CHAIN_MAX_WALLTIME": "600", "RESUMABLE_CHAIN_RETRIES": "0",
        "RESUMABLE_CHAIN_MAX_RETRIES": "3", "RESUMABLE_CHAIN_TIME_LIMIT": "",  # 10 min fit
        "RESUMABLE_CHAIN_EXIT_RESUME": "75", "RESUMABLE_CHAIN_EXIT_STOP": "76",
        "RESUMABLE_CHAIN_END": "1600"}
    assert (second["RESUMABLE_CHAIN_LINK"], second["RESUMABLE_CHAIN_RESUMING"],
            second["RESUMABLE_CHAIN_PREDECESSOR"], second["RESUMABLE_CHAIN_WALLTIME_USED"],
            second["RESUMABLE_CHAIN_WALLTIME_LEFT"], second["RESUMABLE_CHAIN_TIME_LIMIT"],
            second["RESUMABLE_CHAIN_END"]) == (
        "2", "1", "100", "73", "527", "480", "5480")  # limit lowered to the 8 whole minutes left
    assert rc.NAMED_ENV not in second


def test_exports_survive_hostile_values(cluster, tmp_path):
    run_dir = str(tmp_path / "it's $(touch canary) `x` dir")
    script = cluster.write_script(run_dir, work=EXPORTS)
    assert cluster.run_link(script, 100).returncode == 0
    assert exported(cluster)[0]["RESUMABLE_CHAIN_DIR"] == run_dir
    assert not os.path.exists(os.path.join(cluster.root, "canary"))

# --------------------------------------------------------------------------- hostile environments


def hostile_environment(cluster, tmp_path, kind):
    """Return (extra environment, working directory) that breaks a naive `python3 -c` step."""
    poison = "raise SystemExit('shadowed %s imported: the step is not isolated')\n"
    shadow = tmp_path / "shadow"
    shadow.mkdir(exist_ok=True)
    for module in ("json", "subprocess", "re", "os", "signal", "fcntl", "importlib"):
        (shadow / (module + ".py")).write_text(poison % module)
    if kind == "PYTHONPATH shadows json and subprocess":
        return {"PYTHONPATH": str(shadow)}, None
    if kind == "working directory shadows json":
        return {}, str(shadow)
    if kind == "failing user-site .pth":
        base = tmp_path / "userbase"
        for minor in range(6, 14):
            site = base / "lib" / ("python3.%d" % minor) / "site-packages"
            site.mkdir(parents=True)
            (site / "broken.pth").write_text("import sys; sys.exit('broken .pth ran')\n")
        return {"PYTHONUSERBASE": str(base)}, None
    if kind == "PYTHONWARNINGS=error":
        return {"PYTHONWARNINGS": "error", "PYTHONDEVMODE": "1"}, None
    if kind == "PYTHONDONTWRITEBYTECODE=1":
        return {"PYTHONDONTWRITEBYTECODE": "1"}, None
    if kind == "C locale, non-ASCII run directory":
        return {"LANG": "C", "LC_ALL": "C"}, None
    if kind == "PYTHONSTARTUP and PYTHONINSPECT":
        (tmp_path / "startup.py").write_text("raise SystemExit(9)\n")
        return {"PYTHONSTARTUP": str(tmp_path / "startup.py"), "PYTHONINSPECT": "1"}, None
    raise AssertionError(kind)


HOSTILE_ENVIRONMENTS = ["PYTHONPATH shadows json and subprocess", "working directory shadows json",
                        "failing user-site .pth", "PYTHONWARNINGS=error",
                        "PYTHONDONTWRITEBYTECODE=1", "C locale, non-ASCII run directory",
                        "PYTHONSTARTUP and PYTHONINSPECT"]


@pytest.mark.parametrize("kind", HOSTILE_ENVIRONMENTS)
def test_in_job_step_is_immune_to_the_jobs_python_environment(cluster, tmp_path, kind):
    extra, cwd = hostile_environment(cluster, tmp_path, kind)
    run_dir = str(tmp_path / ("rün dïr" if "non-ASCII" in kind else "run"))
    script = cluster.write_script(run_dir, work=EXPORTS)
    result = cluster.run_link(script, 100, cwd=cwd, **extra)
    assert result.returncode == 0, result.stderr
    cluster.finish(100, "TIMEOUT", 73)
    result = cluster.run_link(script, 1000, predecessor=100, cwd=cwd, **extra)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "shadowed" not in result.stderr
    assert read(run_dir, rc.CHAIN_FILE) == "100\n1000\n"
    assert read(run_dir, rc.WALLTIME_FILE) == "73\n"
    assert exported(cluster)[1]["RESUMABLE_CHAIN_DIR"] == os.path.abspath(run_dir)
    assert len(cluster.calls("sbatch")) == 2


def test_read_only_module_directory_still_caches_bytecode():
    """A vendored copy in a read-only directory: bytecode goes to ~/.cache (Python 3.8+)."""
    system_python = "/usr/bin/python3"
    if os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv") or \
            not os.access(system_python, os.X_OK):
        pytest.skip("needs root, setpriv and %s to act as user nobody" % system_python)
    root = tempfile.mkdtemp(prefix="rc-readonly-")
    try:
        module_dir, home = os.path.join(root, "ro"), os.path.join(root, "home")
        os.makedirs(module_dir)
        os.makedirs(home)
        shutil.copy(rc.module_path(), module_dir)
        os.chown(home, 65534, 65534)
        for path in (root, module_dir):
            os.chmod(path, 0o755 if path == root else 0o555)
        argv = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                system_python, "-I", "-S", "-c", rc.BOOTSTRAP,
                os.path.join(module_dir, "resumable_chain.py"), "prologue", "--help"]
        written = []
        for _ in range(2):
            result = subprocess.run(argv, env={"HOME": home, "PATH": "/usr/bin:/bin"},
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    universal_newlines=True, timeout=60)
            assert result.returncode == 0 and "example" in result.stdout, result.stderr
            cached = glob.glob(os.path.join(home, ".cache", "resumable_chain", "**", "*.pyc"),
                               recursive=True)
            assert len(cached) == 1, cached
            written.append(os.stat(cached[0]).st_mtime_ns)
        assert written[0] == written[1]  # the second link compiled nothing
        assert not os.path.exists(os.path.join(module_dir, "__pycache__"))
    finally:
        os.chmod(os.path.join(root, "ro"), 0o755)
        shutil.rmtree(root, ignore_errors=True)


# Bytecode for the module a colleague plants in its __pycache__: its header matches the source
# (magic, flags from 3.7, mtime, size), so an importer that trusts the directory runs it.
PLANT_BYTECODE = r"""
import importlib.util, marshal, os, sys
source, marker = sys.argv[1:]
code = compile("open(%r, 'w').write('planted')" % marker, source, "exec")
info = os.stat(source)
header = importlib.util.MAGIC_NUMBER + (b"\0\0\0\0" if sys.version_info >= (3, 7) else b"")
header += b"".join((value & 0xFFFFFFFF).to_bytes(4, "little")
                   for value in (int(info.st_mtime), info.st_size))
cached = importlib.util.cache_from_source(source)
os.makedirs(os.path.dirname(cached), exist_ok=True)
os.chmod(os.path.dirname(cached), 0o777)
with open(cached, "wb") as handle:
    handle.write(header + marshal.dumps(code))
"""


def oldest_python(default=None):
    """The oldest CPython 3.6-3.13 found, else ``default``."""
    interpreters = find_interpreters()
    return interpreters[min(interpreters, key=lambda version: int(version.split(".")[1]))] \
        if interpreters else default


@pytest.mark.parametrize("planted,which", [
    ("in its __pycache__", "this python"),
    ("in its __pycache__", "the oldest python found"),
    ("nowhere yet", "this python"),
    ("nowhere yet", "the oldest python found"),
    ("in a ~/.cache/resumable_chain others can write", "this python"),
])
def test_bytecode_planted_for_a_module_in_a_shared_directory_never_runs(tmp_path, planted, which):
    """A vendored copy in a directory others may write (a sticky group project directory): its
    __pycache__ is theirs to fill (or to create first), and so is a cache an earlier release
    left group-writable: the in-job step reads neither, nor creates __pycache__ there (3.6 and
    3.7 too: they compile the source)."""
    python = sys.executable if which == "this python" else oldest_python(sys.executable)
    shared, home = tmp_path / "shared", tmp_path / "home"
    shared.mkdir()
    home.mkdir()
    module, marker = str(shared / "resumable_chain.py"), str(tmp_path / "planted-ran")
    shutil.copy(rc.module_path(), module)
    os.chmod(str(shared), 0o1777)
    if "cache" in planted and sys.version_info < (3, 8):
        pytest.skip("no pycache_prefix before 3.8")
    prefix = ["-X", "pycache_prefix=%s/.cache/resumable_chain" % home] if "cache" in planted \
        else []
    if planted != "nowhere yet":
        subprocess.run([python, "-I"] + prefix + ["-c", PLANT_BYTECODE, module, marker],
                       check=True)
    result = subprocess.run([python, "-I", "-S", "-c", rc.BOOTSTRAP, module, "prologue", "--help"],
                            env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, timeout=60)
    assert not os.path.exists(marker), "the planted bytecode ran (%s)" % python
    assert result.returncode == 0 and "example" in result.stdout, result.stderr
    if planted == "nowhere yet":
        assert not os.path.exists(str(shared / "__pycache__"))


@pytest.mark.parametrize("where", ["a shared directory", "the user's own directory"])
def test_a_umask_of_002_leaves_no_bytecode_directory_a_colleague_can_write(tmp_path, where):
    """Under umask 002 (a shared primary group) the bytecode directories the in-job step makes
    (the module's __pycache__, ~/.cache/resumable_chain) are not group-writable, and the next
    start reads them; the work keeps the umask."""
    module_dir, home = tmp_path / "modules", tmp_path / "home"
    module_dir.mkdir()
    home.mkdir()
    os.chmod(str(home), 0o755)
    os.chmod(str(module_dir), 0o1777 if where == "a shared directory" else 0o755)
    module = str(module_dir / "resumable_chain.py")
    shutil.copy(rc.module_path(), module)
    report = rc.BOOTSTRAP.replace("status = m.main(sys.argv[1:])", (
        "print(oct(os.umask(0)), bool(here or prefix)); status = 0"))
    for start in ("first", "second"):
        result = subprocess.run(["bash", "-c", 'umask 002; exec "$@"', "_", sys.executable, "-I",
                                 "-S", "-c", report, module], env={"HOME": str(home),
                                 "PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        cached = sys.version_info >= (3, 8) or where == "the user's own directory"
        assert result.stdout.split() == ["0o2", str(cached)], (start, result.stderr)
    made = [os.path.join(folder, name) for top in (str(module_dir), str(home))
            for folder, names, files in os.walk(top) for name in names + files]
    assert made and all(not os.lstat(path).st_mode & 0o022 for path in made), [
        (path, oct(os.lstat(path).st_mode)) for path in made]


def test_a_huge_max_retries_accepted_at_render_time_works_in_the_job(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir, max_retries=1000000)
    cluster.finish(100, "FAILED", 1)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 0, result.stderr
    assert "retries 1/1000000" in result.stderr

# --------------------------------------------------------------------------- the hot path's reads

AUDIT = r'''
import json, os, sys
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests")]
import fake_slurm
import resumable_chain as rc
run_dir = sys.argv[2]
store = rc.StateStore(run_dir)
os.makedirs(run_dir)
store.write_text(rc.CHAIN_FILE, "".join("%d\n" % (100 + n) for n in range(1000)))
store.write_text(rc.WALLTIME_FILE, "500\n")
store.write_text(rc.RETRIES_FILE, "1\n")
store.write_record(rc.Record(job="1099", action="resume", walltime=500, retries=1, link=1000,
                             max_retries=3, successor="2000", phase="queued"))

cluster = run_dir + ".cluster.json"
fake_slurm.save(cluster, {"next_id": 2001, "jobs": {
    "1099": {"state": "TIMEOUT", "elapsed": 73, "start": "2026-11-30T00:00:00"},
    "2000": {"state": "RUNNING", "elapsed": 1, "start": "2026-11-30T01:00:00"}}})
rc.run_slurm = fake_slurm.InProcess(cluster)
reads = {}

def hook(event, args):
    if event == "open" and isinstance(args[0], str) and os.path.dirname(args[0]) == run_dir:
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        if args[1] in ("r", "rb", None) and flags & os.O_ACCMODE == os.O_RDONLY:
            name = os.path.basename(args[0])
            reads[name] = reads.get(name, 0) + 1

sys.addaudithook(hook)
outcome = rc.run_link(run_dir, rc.Settings(3, 86400), rc.NextLink(sys.argv[1] + "/README.md"),
                      {"SLURM_JOB_ID": "2000", "SLURM_JOB_DEPENDENCY": "afternotok:1099"})
print(json.dumps({"status": outcome.status, "reads": reads}))
'''


def test_a_resuming_link_reads_each_state_file_once(tmp_path):
    result = subprocess.run([sys.executable, "-c", AUDIT, os.path.dirname(rc.__file__),
                             str(tmp_path / "run")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == 0
    state_files = (rc.CHAIN_FILE, rc.WALLTIME_FILE, rc.RETRIES_FILE, rc.JOURNAL_FILE)
    assert {name: report["reads"].get(name, 0) for name in state_files} == {
        name: 1 for name in state_files}, report
    assert max(report["reads"].values()) == 1, report  # the cancel mark: tried once (missing)


def test_c_locale_and_a_non_ascii_run_directory_on_the_oldest_python(tmp_path):
    oldest = oldest_python()
    if oldest is None:
        pytest.skip("no CPython 3.6-3.13 found besides the one running the tests")
    cluster = FakeCluster(str(tmp_path), python=oldest)
    run_dir = str(tmp_path / "rün dïr")
    script = cluster.write_script(run_dir, work=EXPORTS)
    assert cluster.run_link(script, 100, LANG="C", LC_ALL="C").returncode == 0
    cluster.finish(100, "TIMEOUT", 73)
    result = cluster.run_link(script, 1000, predecessor=100, LANG="C", LC_ALL="C")
    assert result.returncode == 0, (oldest, result.stderr)
    assert exported(cluster)[1]["RESUMABLE_CHAIN_DIR"] == run_dir
    assert read(run_dir, rc.CHAIN_FILE) == "100\n1000\n"


# The command line's modules: a link must not pay for them (tempfile alone imports random).
COMMAND_LINE_ONLY = {"argparse", "gettext", "tempfile", "random", "shlex", "copy", "calendar",
                     "pwd", "_strptime", "shutil", "lzma", "bz2"}


def test_the_in_job_step_imports_none_of_the_command_lines_modules(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(successor, "RUNNING", 0)
    cluster.finish(100, "TIMEOUT", 73)
    report = rc.BOOTSTRAP.replace("status = m.main(sys.argv[1:])", (
        "status = m.main(sys.argv[1:]); "
        "sys.stderr.write('MODULES %s\\n' % ' '.join(sorted(sys.modules)))"))
    assert report != rc.BOOTSTRAP
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", report, rc.module_path(), "prologue",
         "--script=" + script, run_dir], env=cluster.env(successor, "afternotok:100"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert result.returncode == 0, result.stderr
    assert "predecessor 100 TIMEOUT" in result.stderr  # it did the whole step
    loaded = set(result.stderr.split("MODULES ")[1].split())
    assert "json" in loaded and not COMMAND_LINE_ONLY & loaded, sorted(COMMAND_LINE_ONLY & loaded)


@pytest.mark.parametrize("words, said", [(["prologue", "--help"], "example"),
                                          (["no-such-command"], "invalid choice")])
def test_a_step_ends_without_pythons_teardown_its_words_all_out(words, said):
    # After the prologue's fork a teardown would copy every page it touches: 10 ms of each link
    # before its work (docs/performance.md). Output is flushed first, the status kept.
    report = rc.BOOTSTRAP.replace("status = m.main(sys.argv[1:])", (
        "import atexit; atexit.register(lambda: sys.stderr.write('TEARDOWN')); "
        "status = m.main(sys.argv[1:])"))
    assert report != rc.BOOTSTRAP
    result = subprocess.run([sys.executable, "-I", "-S", "-c", report, rc.module_path()] + words,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    assert "TEARDOWN" not in result.stderr and said in result.stdout + result.stderr
    assert result.returncode == (0 if said == "example" else rc.EXIT_USAGE)


def test_a_link_that_lost_its_dependency_variable_continues_its_predecessor(cluster, run_dir):
    # The journal names the successor the predecessor queued: that is enough to continue.
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 73)
    result = cluster.run_link(script, successor)  # no SLURM_JOB_DEPENDENCY
    assert result.returncode == 0, result.stderr
    assert "predecessor 100 TIMEOUT" in result.stderr
    assert read(run_dir, rc.CHAIN_FILE) == "100\n%s\n" % successor
    assert read(run_dir, rc.WALLTIME_FILE) == "73\n"


def test_a_chain_from_before_link_numbers_goes_on_without_them(cluster, run_dir):
    script, successor = start_chain(cluster, run_dir, work=EXPORTS)
    journal = json.loads(read(run_dir, rc.JOURNAL_FILE))
    del journal["link"]  # as 0.1 wrote it
    with open(os.path.join(run_dir, rc.JOURNAL_FILE), "w") as handle:
        json.dump(journal, handle)
    cluster.finish(100, "TIMEOUT", 73)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 0, result.stderr
    assert exported(cluster)[1]["RESUMABLE_CHAIN_LINK"] == ""
    assert json.loads(read(run_dir, rc.JOURNAL_FILE))["link"] is None
    assert read(run_dir, rc.CHAIN_FILE) == "100\n%s\n" % successor


@pytest.mark.parametrize("source", ["scontrol", "sacct"])
def test_the_work_steers_the_chain_with_exit_75_and_76(cluster, run_dir, source):
    # 75 twice (after a minute of work) with max_retries 0: no retry counted, the chain goes
    # on; then 76 stops it.
    script, successor = start_chain(cluster, run_dir, max_retries=0)
    links = ["100", successor]
    for exit_code in ("75:0", "75:0", "76:0"):
        cluster.finish(links[-2], "FAILED", 60)
        cluster.set_job(links[-2], exit_code=exit_code, in_controller=source == "scontrol")
        result = cluster.run_link(script, links[-1], predecessor=links[-2])
        if exit_code == "76:0":
            assert result.returncode == 0 and "exit 76: stopping the chain" in result.stderr
            break
        assert result.returncode == 0 and "resuming (not counted as a retry)" in result.stderr
        links.append(cluster.pending()[-1])
    assert read(run_dir, rc.RETRIES_FILE) == "0\n" and read(run_dir, rc.WALLTIME_FILE) == "180\n"
    assert cluster.work_done() == links[:3]
    record = json.loads(read(run_dir, rc.JOURNAL_FILE))
    assert (record["cause"], record["predecessor_exit_code"]) == ("work", 76)



@pytest.mark.parametrize("state", ["NODE_FAIL", "BOOT_FAIL", "CANCELLED by 0"],
                         ids=["its node failed while Slurm launched it", "its node did not boot",
                              "its node Prolog failed: slurmd cancelled it"])
def test_a_successor_that_died_before_its_prologue_is_replaced_by_its_guard(
        cluster, run_dir, capsys, monkeypatch, state):
    script = cluster.write_script(run_dir)
    assert cluster.run_link(script, 100, args=["--lr", "3e-4"],
                            SBATCH_GRES="gpu:8").returncode == 0
    [successor] = cluster.pending()
    cluster.finish(100, "TIMEOUT", 60)
    guard = cluster.guards()[successor]
    cluster.set_job(successor, state=state, start="2026-11-30T01:01:00", elapsed=0,
                    end="2026-11-30T01:01:00")  # it had its node: Slurm was launching it
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check")
    assert status == 0 and ("verdict: waiting: job 100 ended TIMEOUT and its successor %s ended "
                            "%s on %s before its prologue recorded it (it never started, or its "
                            "prologue refused: its log says which); its guard %s (PENDING) "
                            "continues the chain" % (successor, state, fake_slurm.NODE, guard)) in out
    result = cluster.run_guard(successor)
    assert result.returncode == 0, result.stderr
    [new] = cluster.pending()
    assert ("guard %s of job %s: job %s died before its prologue (%s on %s); the chain "
            "continued with job %s" % (guard, successor, successor, state.split()[0],
                                       fake_slurm.NODE, new)) in result.stderr
    queued = cluster.job(new)
    assert (queued["dependency"], queued["held"], queued["requeue"]) == ("", False, "0")
    assert queued["script"] == cluster.job(successor)["script"] and queued["args"] == [
        "--lr", "3e-4"] and "--job-name=job.sh" in queued["options"]
    assert cluster.calls("sbatch")[-1]["env"]["SBATCH_GRES"] == "gpu:8"  # the user's defaults
    assert cluster.guards() == {new: "900001"}  # the new link is guarded in turn
    record = json.loads(read(run_dir, rc.JOURNAL_FILE))
    assert (record["job"], record["successor"], record["node_deaths"]) == ("100", new, 1)
    assert record["dead_successors"] is None  # the cluster's deaths are not retries
    result = cluster.run_link(script, new)  # no dependency: the journal names its predecessor
    assert result.returncode == 0, result.stderr
    assert "resume | predecessor 100 TIMEOUT" in result.stderr
    assert read(run_dir, rc.CHAIN_FILE).split() == ["100", new]
    assert read(run_dir, rc.WALLTIME_FILE) == "60\n" and read(run_dir, rc.RETRIES_FILE) == "0\n"
    assert cluster.job("900001")["state"].startswith("CANCELLED")  # its own guard, done
    events = json.loads(read(run_dir, rc.EVENTS_FILE))["events"]
    assert [(event["event"], event["job"]) for event in events] == [("healed", successor)]
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir)
    assert "healed (job %s): job %s died before its prologue" % (successor, successor) in out


@pytest.mark.parametrize("cancelled_by", ["a person", "Slurm: its predecessor completed"])
def test_a_successor_cancelled_before_it_started_is_not_continued_by_its_guard(
        cluster, run_dir, capsys, monkeypatch, cancelled_by):
    script, successor = start_chain(cluster, run_dir)
    if cancelled_by == "a person":
        cluster.set_job(successor, state="CANCELLED by 1000", end="2026-11-30T01:00:00")
        cluster.finish(100, "TIMEOUT", 60)
    else:  # the work finished: kill-on-invalid-dep
        cluster.finish(100, "COMPLETED", 60)
        cluster.set_job(successor, state="CANCELLED", end="2026-11-30T01:00:00",
                        reason="DependencyNeverSatisfied")
    before = json.loads(read(run_dir, rc.JOURNAL_FILE))
    result = cluster.run_guard(successor)
    assert result.returncode == 0, result.stderr
    assert cluster.pending() == [] and cluster.guards() == {}  # nothing of the chain is left
    assert json.loads(read(run_dir, rc.JOURNAL_FILE)) == before
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check")
    word = "stopped" if cancelled_by == "a person" else "finished"
    assert status == 0 and "verdict: %s" % word in out
    # no link is left to journal the chain's end: its guard does, with or without --notify
    events = json.loads(read(run_dir, rc.EVENTS_FILE))["events"]
    assert [(event["event"], event["job"]) for event in events] == [(word, "100")]


@pytest.mark.parametrize("accounting", ["answers", "lags, then answers"])
def test_a_successor_a_person_cancelled_as_slurm_launched_it_stops_the_chain(
        cluster, run_dir, capsys, monkeypatch, accounting):
    # It had its node (a person's scancel as the node Prolog ran): not the node's failure, and
    # the controller does not say who cancelled it; accounting does, once it has caught up.
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 60)
    cluster.set_job(successor, state="CANCELLED by 1000", start="2026-11-30T01:01:00",
                    end="2026-11-30T01:01:00",
                    **({"sacct_hidden_calls": 1} if accounting != "answers" else {}))
    result = cluster.run_guard(successor)
    assert result.returncode == 0, result.stderr
    assert len(cluster.calls("sacct")) == (1 if accounting == "answers" else 2)  # asked again
    assert cluster.pending() == [] and cluster.guards() == {}  # nothing replaced it
    events = json.loads(read(run_dir, rc.EVENTS_FILE))["events"]
    assert [(event["event"], event["job"]) for event in events] == [("stopped", "100")]
    assert "was cancelled as Slurm launched it (CANCELLED by " in events[0]["reason"]
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check")
    assert status == 0 and "verdict: stopped: job 100 ended TIMEOUT and its successor %s was " \
        "CANCELLED by " % successor in out, out


OWN = "their own failures, more than max_retries 1 allows"
CLUSTERS = "the cluster's failures, more than the 10 allowed"


@pytest.mark.parametrize("deaths,given_up", [
    # max_retries 1: the first death is free, the second counts, the third is not replaced
    (["FAILED"] * 3, "3 successors of job 100 died before their prologue by " + OWN),
    (["DEADLINE"] * 3, "3 successors of job 100 died before their prologue by " + OWN),
    # the cluster's deaths are not retries (as a running link's node failure), up to NODE_DEATHS
    (["NODE_FAIL"] * 11, "11 successors of job 100 died before their prologue by " + CLUSTERS),
    (["CANCELLED by 0"] * 11, "11 successors of job 100 died before their prologue by " + CLUSTERS),
    (["PREEMPTED", "BOOT_FAIL"] * 5 + ["NODE_FAIL"], "11 successors of job 100 died before "
     "their prologue by " + CLUSTERS),
    (["NODE_FAIL"] * 3 + ["FAILED"] * 3, "3 successors of job 100 died before their prologue "
     "by " + OWN),  # one counter each: the cluster's failures do not use up max_retries
    (["FAILED"] * 2 + ["NODE_FAIL"] * 11, "11 successors of job 100 died before their prologue "
     "by " + CLUSTERS),
], ids=["its script fails before the prologue", "its deadline passed",
        "its node fails at launch", "its node's Prolog fails", "preempted, its node did not boot",
        "node failures, then its script's", "its script's failures, then the nodes'"])
def test_successors_that_keep_dying_before_their_prologue_end_in_broken(
        cluster, run_dir, capsys, monkeypatch, deaths, given_up):
    script, successor = start_chain(cluster, run_dir, max_retries=1)
    cluster.finish(100, "TIMEOUT", 60)
    dead = [successor]
    for state in deaths:
        cluster.set_job(dead[-1], state=state, start="2026-11-30T01:01:00",
                        end="2026-11-30T01:01:00")
        result = cluster.run_guard(dead[-1])
        assert result.returncode == 0, result.stderr
        dead += cluster.pending()
    assert len(dead) == len(deaths) and cluster.pending() == [] and cluster.guards() == {}
    assert "%s: not replaced; %s resume continues the chain" % (given_up, BY_PATH) \
        in result.stderr
    events = json.loads(read(run_dir, rc.EVENTS_FILE))["events"]
    assert [event["event"] for event in events] == ["healed"] * (len(deaths) - 1) + ["broken"]
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check")
    assert status == 1 and "verdict: broken" in out
    status, out, err = run_cli(cluster, capsys, monkeypatch, "resume", run_dir)
    assert status == 0, err


def test_a_site_that_refuses_the_guard_gets_slurms_requeue_instead(cluster, run_dir, capsys,
                                                                   monkeypatch):
    cluster.update(sbatch_wrap_error="Batch job submission failed: Requested node configuration "
                                     "is not available")
    script, successor = start_chain(cluster, run_dir)
    assert cluster.guards() == {} and cluster.job(successor)["requeue"] == "1"
    cluster.finish(100, "TIMEOUT", 60)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 0, result.stderr
    assert ("WARNING: could not queue a guard for job %s (sbatch: error: Batch job submission "
            "failed: Requested node configuration is not available): if it dies before its "
            "prologue, only Slurm's requeue can start it again" % cluster.pending()[-1]
            ) in result.stderr
    assert cluster.job(cluster.pending()[-1])["requeue"] == "1"
    record = json.loads(read(run_dir, rc.JOURNAL_FILE))
    assert record["guard"] is None and "Requested node configuration" in record["guard_error"]
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir)
    assert "guard: none: sbatch: error: Batch job submission failed" in out


@pytest.mark.parametrize("death", ["NODE_FAIL", "BOOT_FAIL", "launch failure"],
                         ids=["its node failed while Slurm launched it",
                              "its node did not boot",
                              "its node Prolog failed: requeued held, a person released it"])
def test_an_unguarded_successor_slurm_requeued_before_its_prologue_continues_it_counted_once(
        cluster, run_dir, capsys, monkeypatch, death):
    # A successor without a guard (the site refused it) is queued requeueable: Slurm requeues
    # a --requeue job whose launch fails (job_mgr.c: BOOT_FAIL only when requeue is refused);
    # after a node Prolog failure it holds it (launch failed requeued held).
    cluster.update(sbatch_wrap_error="Batch job submission failed: Invalid partition")
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 60)
    earlier = {"state": "NODE_FAIL" if death == "launch failure" else death, "elapsed": 1,
               "start": "2026-11-30T01:01:00", "end": "2026-11-30T01:01:01"}
    cluster.set_job(successor, runs=[earlier], submit="2026-11-30T01:01:01")
    if death == "launch failure":
        cluster.set_job(successor, reason="launch failed requeued held", held=True)
        status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check")
        assert status == 1 and "its launch failed (node Prolog) and Slurm held it" in out
        assert "scontrol release %s" % successor in out
        cluster.set_job(successor, reason=None, held=False)  # the person released it
    result = cluster.run_link(script, successor, predecessor=100, SLURM_RESTART_COUNT="1")
    assert result.returncode == 0, result.stderr
    assert "resume | predecessor 100 TIMEOUT" in result.stderr
    assert read(run_dir, rc.CHAIN_FILE).split() == ["100", successor]
    assert read(run_dir, rc.WALLTIME_FILE) == "60\n"  # the link that timed out, counted once


def killing_python(tmp_path, cluster, kill_at):
    """An interpreter command whose first step is SIGKILLed at checkpoint ``kill_at`` (as the
    OOM killer or a person would), and whose later steps run normally."""
    wrapper = tmp_path / "python-killed-once"
    wrapper.write_text('#!/bin/bash\nif [ ! -e "$0.ran" ]; then : > "$0.ran"; export %s=%d; fi\n'
                       'exec %s "$@"\n' % (rc.CRASH_ENV, kill_at, shlex.quote(cluster.python)))
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.mark.parametrize("kill_at", range(1, 9), ids=lambda point: "killed at checkpoint %d" % point)
def test_a_step_killed_by_a_signal_runs_once_more_and_the_link_goes_on(cluster, run_dir, tmp_path,
                                                                       kill_at):
    script, successor = start_chain(cluster, run_dir, python=killing_python(tmp_path, cluster,
                                                                            kill_at))
    os.unlink(str(tmp_path / "python-killed-once.ran"))  # the first link's step was the one killed
    cluster.finish(100, "TIMEOUT", 73)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 0, result.stderr
    assert cluster.work_done() == ["100", successor]
    [queued] = [job for job in cluster.pending() if job != successor]  # one successor, not two
    assert read(run_dir, rc.CHAIN_FILE).split() == ["100", successor]
    assert read(run_dir, rc.WALLTIME_FILE) == "73\n" and read(run_dir, rc.RETRIES_FILE) == "0\n"
    assert json.loads(read(run_dir, rc.JOURNAL_FILE))["successor"] == queued


def test_chaos_run_a_link_whose_node_fails_before_its_successor_is_queued_is_continued(cluster,
                                                                                      run_dir):
    # Found by the chaos run on the real cluster (22.05): sbatch failed for a minute, the
    # retrier had not succeeded yet, and the node failed: the link ended NODE_FAIL with no
    # successor and the chain was lost. The link's guard runs when it ends and queues it.
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 60)
    cluster.update(sbatch_error="Batch job submission failed: Socket timed out on send/recv "
                                "operation")
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 0 and "could not queue a successor" in result.stderr
    assert cluster.guards() == {successor: "900000"}  # kept: nothing else would continue
    cluster.update(sbatch_error=None)
    cluster.finish(successor, "NODE_FAIL", 20)
    result = cluster.run_guard(successor)
    assert result.returncode == 0, result.stderr
    [queued] = [job for job in cluster.pending() if job != successor]
    assert ("job %s ended NODE_FAIL before it queued its successor; the chain continued with "
            "job %s" % (successor, queued)) in result.stderr
    assert cluster.job(queued)["dependency"] == ""  # held, released once journaled
    assert cluster.guards() == {queued: "900001"}
    result = cluster.run_link(script, queued, RESUMABLE_CHAIN_NAMED="1")
    assert result.returncode == 0, result.stderr
    assert read(run_dir, rc.WALLTIME_FILE) == "80\n" and read(run_dir, rc.RETRIES_FILE) == "0\n"
    assert cluster.work_done() == ["100", successor, queued]
    events = json.loads(read(run_dir, rc.EVENTS_FILE))["events"]
    assert [(event["event"], event["job"]) for event in events] == [("healed", successor)]


@pytest.mark.parametrize("name", ["RESUMABLE_CHAIN_VIEW_WAIT", "RESUMABLE_CHAIN_LOOKUP_SECONDS",
                                  "RESUMABLE_CHAIN_COMMAND_TIMEOUT"])
def test_a_bad_tuning_variable_is_refused_by_the_first_link_not_met_later_by_a_guard(
        cluster, run_dir, name):
    script = cluster.write_script(run_dir)
    result = cluster.run_link(script, 100, **{name: "soon"})
    assert result.returncode == 2 and cluster.work_done() == []
    assert cluster.calls("sbatch", guards=True) == []
    assert "%s='soon' is not a number of seconds" % name in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["cancel", "--dry-run"]])
@pytest.mark.parametrize("name, value, said", [
    ("RESUMABLE_CHAIN_COMMAND_TIMEOUT", "abc", "='abc' is not a number of seconds"),
    ("RESUMABLE_CHAIN_LOCK", "bogus", "=bogus: use kernel or file"),
])
def test_a_bad_tuning_variable_is_named_by_every_command_not_blamed_on_a_state_file(
        cluster, run_dir, capsys, monkeypatch, command, name, value, said):
    # Attack trial: status said "cannot read the chain's state (...)", next "fix the named file".
    start_chain(cluster, run_dir)
    monkeypatch.setenv(name, value)
    status, out, err = run_cli(cluster, capsys, monkeypatch, *command + [run_dir])
    assert status == 2 and out == "" and err.count("\n") == 1, out + err
    assert name + said in err


@pytest.mark.parametrize("argv", [["--version"], ["status", "--help"]])
def test_help_and_version_need_no_good_tuning_variable(capsys, monkeypatch, argv):
    monkeypatch.setenv("RESUMABLE_CHAIN_COMMAND_TIMEOUT", "abc")
    assert rc.main(argv) == 0 and "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("argv0", [[], ["python"]], ids=["no argv (embedded)", "an argv"])
def test_a_driver_calls_main_whatever_sys_argv_holds(capsys, monkeypatch, argv0):
    monkeypatch.setattr(sys, "argv", argv0)
    assert rc.main(["--version"]) == 0 and rc.__version__ in capsys.readouterr().out


@pytest.mark.parametrize("own_limit, told, said", [
    (60, "", None),  # its own minute is within the 5-minute cap: nothing lowered
    (600, "300", "time limit lowered to 5 min"),
    (300, "", None),
], ids=["its limit is below the cap", "the cap is below its limit", "they are equal"])
@pytest.mark.parametrize("release", ["22.05", "23.02+"])
def test_the_work_is_told_the_time_limit_the_link_really_has(cluster, run_dir, own_limit, told,
                                                              said, release):
    # Seen on 22.05 (a new user's trial): -t 1 with --max-walltime 5 told the work
    # RESUMABLE_CHAIN_TIME_LIMIT=300 and logged "time limit lowered to 5 min"; sacct: 1:00.
    # Before 23.02 the controller tells the limit (its StartTime is local time).
    script = cluster.write_script(run_dir, max_walltime="5:00", work=EXPORTS)
    cluster.set_job(100, time_limit=str(own_limit // 60))
    start = int(time.mktime(time.strptime("2026-11-30T01:00:00", "%Y-%m-%dT%H:%M:%S")))
    told_by_slurm = {} if release == "22.05" else {"SLURM_JOB_START_TIME": start,
                                                   "SLURM_JOB_END_TIME": start + own_limit}
    result = cluster.run_link(script, 100, **told_by_slurm)
    assert result.returncode == 0, result.stderr
    [first] = exported(cluster)
    assert first["RESUMABLE_CHAIN_TIME_LIMIT"] == told
    assert first["RESUMABLE_CHAIN_END"] == str(start + min(own_limit, 300))
    assert (said in result.stderr) if said else "lowered" not in result.stderr


@pytest.mark.parametrize("variables,said", [
    ({"SLURM_SUBMIT_DIR": "relative/dir"}, "refusing to write the journal"),
    ({"SLURM_ARRAY_TASK_ID": "1-3"}, "malformed SLURM_ARRAY_TASK_ID"),
    ({"SLURM_ARRAY_TASK_ID": "1,afterok:4242"}, "malformed SLURM_ARRAY_TASK_ID"),
], ids=["a relative submit directory", "a range for a task ID", "a dependency in a task ID"])
def test_a_link_whose_slurm_variables_no_journal_can_hold_queues_nothing(cluster, run_dir,
                                                                         variables, said):
    """Slurm never sets these, but a job's environment is the user's: what comes from it is
    checked as what comes from a state file (the journal as written, as read), so no link queues
    a successor its own journal then disowns, or one with a dependency of the environment's."""
    script = cluster.write_script(run_dir)
    result = cluster.run_link(script, 100, **variables)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert cluster.calls("sbatch") == [] and cluster.work_done() == []
    assert not os.path.exists(os.path.join(run_dir, rc.JOURNAL_FILE))


def test_an_array_job_without_a_task_id_is_a_plain_job(cluster, run_dir):
    script = cluster.write_script(run_dir)
    result = cluster.run_link(script, 100, SLURM_ARRAY_JOB_ID="100", SLURM_ARRAY_TASK_COUNT="2")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    [call] = cluster.calls("sbatch")
    assert "--dependency=afternotok:100" in call["argv"]
