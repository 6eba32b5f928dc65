"""Issue 43 items 2-3: sweeps and chains under the job limits and rate limits of large sites."""
import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

import resumable_chain as rc
import fake_slurm
import histories
from fake_cluster import FakeCluster, read, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
SWEEP_SCRIPT = "#!/bin/bash\n#SBATCH --time=10\necho work\n"


def recorded(release, name):
    """A real command's stdout, recorded under tests/slurm_outputs (past "# $" and "# exit")."""
    with open(os.path.join(HERE, "slurm_outputs", release, name + ".txt")) as handle:
        text = handle.read().split("# stderr")[0]
    return "".join(text.splitlines(True)[2:])


def test_the_config_says_whether_limits_are_enforced():
    config = rc.parse_config(recorded("22.05", "scontrol-show-config"))
    assert config["AccountingStorageEnforce"] == "none" and config["ClusterName"] == "local"
    assert rc.parse_config("AccountingStorageEnforce = associations,limits\n")[
        "AccountingStorageEnforce"].split(",") == ["associations", "limits"]


@pytest.mark.parametrize("assoc, account, qos, expected", [
    ("sacctmgr-assoc-limits", None, None, [(6, "MaxSubmitJobs of association rclimit")]),
    ("sacctmgr-assoc-limits", "other", None, []),  # --account names another association
    ("sacctmgr-assoc-limits", None, "rclimit", [
        (6, "MaxSubmitJobs of association rclimit"), (8, "MaxSubmitJobsPerUser of QOS rclimit")]),
    ("sacctmgr-assoc-no-limit", None, None, []),  # QOS normal has none either
    ("sacctmgr-assoc-no-limit", None, "rclimit", [(8, "MaxSubmitJobsPerUser of QOS rclimit")]),
    ("sacctmgr-assoc-unknown-user", None, None, []),
], ids=["association limit", "another account", "and the QOS named", "no limit",
        "the QOS named only", "no association"])
def test_job_limits_are_read_from_real_sacctmgr_output(assoc, account, qos, expected):
    assert rc.submit_limits(recorded("22.05", assoc), recorded("22.05", "sacctmgr-qos"), "local",
                            account, qos) == expected


@pytest.mark.parametrize("release, cluster", [
    ("22.05", "local"), ("24.11", "local2411"), ("26.05", "local2605")])
def test_each_release_shows_the_association_limit_alike(release, cluster):
    assert rc.submit_limits(recorded(release, "sacctmgr-assoc-limits"), recorded(
        release, "sacctmgr-qos"), cluster) == [(6, "MaxSubmitJobs of association rclimit")]


def test_another_clusters_association_does_not_limit_this_one():
    assert rc.submit_limits(recorded("22.05", "sacctmgr-assoc-limits"), "", "local2411") == []


@pytest.mark.parametrize("tasks, queued, fits", [
    (2, 0, True),  # 6 jobs at the peak: exactly the limit
    (3, 0, False),
    (1, 3, True),
    (1, 4, False),  # the user's other jobs count too
], ids=["fits exactly", "one task too many", "beside queued jobs", "queued jobs leave no room"])
def test_a_sweep_fits_when_its_peak_fits_beside_the_users_jobs(tasks, queued, fits):
    why = rc.sweep_beyond_limit(tasks, [(6, "MaxSubmitJobs of association lab")], queued)
    assert (why is None) == fits
    assert fits or "at most %d tasks fit" % ((6 - queued) // 3) in why


def submit_sweep(cluster, tmp_path, capsys, monkeypatch, *options):
    script = tmp_path / "train.sbatch"
    script.write_text(SWEEP_SCRIPT)
    sweep = str(tmp_path / "sweep")
    return sweep, run_cli(cluster, capsys, monkeypatch, "submit", sweep, "--python",
                          sys.executable, *(list(options) + [str(script)]))


@pytest.mark.parametrize("settings, array, queued, refused", [
    ({"enforce": "associations,limits", "assoc_max_submit": 12}, "0-4", 0, "at most 4 tasks"),
    ({"enforce": "associations,limits", "qos_max_submit": 12}, "0-3", 1, "at most 3 tasks"),
    ({"enforce": "associations,limits", "assoc_max_submit": 12}, "0-3", 0, None),
    ({"enforce": "associations", "assoc_max_submit": 12}, "0-4", 0, None),  # not enforced
    ({}, "0-4", 0, None),
], ids=["association", "QOS and a queued job", "fits", "limits not enforced", "no limits"])
def test_a_sweep_beyond_the_users_job_limit_is_refused_before_anything_is_queued(
        cluster, tmp_path, capsys, monkeypatch, settings, array, queued, refused):
    cluster.update(**settings)
    for job in range(queued):
        cluster.set_job(50 + job, state="RUNNING", uid=os.geteuid())
    sweep, (status, out, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch,
                                             "--array=" + array)
    if refused:
        assert status == 2 and refused in err and err.count("\n") == 1, err
        assert cluster.calls("sbatch", guards=True) == [] and not os.path.exists(sweep)
    else:
        assert status == 0, err
    asked = [call["argv"][:2] for call in cluster.calls("sacctmgr")]
    assert asked == ([["-n", "-P"]] * 2 if "limits" in settings.get("enforce", "") else [])


def test_a_sweep_whose_limits_cannot_be_read_is_refused(cluster, tmp_path, capsys, monkeypatch):
    cluster.update(enforce="associations,limits", sacctmgr_down=True)
    sweep, (status, out, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "-a", "0-1")
    assert status == 2 and "cannot read your job limits" in err and "Connection refused" in err
    assert cluster.calls("sbatch", guards=True) == []


def test_a_plain_chain_and_a_link_never_ask_for_limits(cluster, tmp_path, capsys, monkeypatch):
    cluster.update(enforce="associations,limits", assoc_max_submit=100)
    script = tmp_path / "plain.sbatch"
    script.write_text(SWEEP_SCRIPT)
    run_dir = str(tmp_path / "r")
    assert run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "--python", sys.executable,
                   str(script))[0] == 0
    assert cluster.run_link(os.path.join(run_dir, "resumable-plain.sbatch"), "1000").returncode == 0
    assert cluster.calls("sacctmgr") == [] and read(run_dir, rc.CHAIN_FILE) == "1000\n"


REFUSED = ("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job "
           "submit limit, user's size and/or time limits)")


def test_sbatchs_refusal_by_a_job_limit_is_recognized_in_its_real_words():
    with open(os.path.join(HERE, "slurm_outputs", "24.11", "sbatch-job-limit.txt")) as handle:
        stderr = handle.read().split("# stderr\n")[1]
    assert rc.JOB_LIMIT_REFUSAL in rc.last_line(stderr) and rc.last_line(stderr) == REFUSED
    assert rc.JOB_LIMIT_REFUSAL not in ("sbatch: error: Batch job submission failed: Invalid "
                                        "partition name specified")


def refused_link(tmp_path, monkeypatch, refusal):
    """Link 1000 (guarded by 1500) ended TIMEOUT after its successor's sbatch was refused; the
    user's job 50 still runs and sbatch refuses with ``refusal`` (the job limit, or another
    error). The fake Slurm in-process."""
    run_dir, script = str(tmp_path / "run"), str(tmp_path / "job.sh")
    os.makedirs(run_dir)
    with open(script, "w") as handle:
        handle.write("#!/bin/bash\ntrue\n")
    store = rc.StateStore(run_dir)
    store.write_text(rc.CHAIN_FILE, "100\n1000\n")
    store.write_record(rc.Record(
        job="1000", predecessor="100", action="resume", walltime=60, retries=0, max_retries=3,
        link=2, successor_error=REFUSED, guarded_by="1500", phase="queued",
        next=rc.NextLink(script, [], [], "job.sh")._asdict()))
    ended = {"start": "2026-11-30T00:00:00", "end": "2026-11-30T01:00:00", "elapsed": 60}
    cluster = {"next_id": 2000, "jobs": {
        "1000": dict(ended, state="TIMEOUT"), "50": {"state": "RUNNING", "uid": os.geteuid()},
        "1500": {"state": "RUNNING", "wrap": "guard", "dependency": "afterany:1000",
                 "uid": os.geteuid()}}}
    cluster.update({"enforce": "associations,limits", "assoc_max_submit": 2} if refusal == "limit"
                   else {"sbatch_error": "Batch job submission failed: Invalid account"})
    path = str(tmp_path / "cluster.json")
    fake_slurm.save(path, cluster)
    monkeypatch.setattr(rc, "run_slurm", fake_slurm.InProcess(path))
    return run_dir, path


def guard(run_dir, restarts=None):
    clock = histories.OwnClock()
    environ = dict({"SLURM_JOB_ID": "1500"}, **({"SLURM_RESTART_COUNT": str(restarts)}
                                               if restarts is not None else {}))
    return rc.guard_chain(run_dir, "1000", environ, sleep=clock.sleep, clock=clock)


@pytest.mark.parametrize("refusal, restarts, requeued, event", [
    ("limit", None, True, None),  # an outage: the guard holds its slot and tries again later
    ("limit", rc.GUARD_REQUEUES - 1, True, None),
    ("limit", rc.GUARD_REQUEUES, False, "broken"),  # hours of it: a person must look
    ("other", None, False, "broken"),
], ids=["refused by the job limit", "requeued often", "requeued too often",
        "refused for another reason"])
def test_a_guard_refused_by_the_job_limit_to_its_last_try_is_requeued_not_broken(
        tmp_path, monkeypatch, refusal, restarts, requeued, event):
    run_dir, path = refused_link(tmp_path, monkeypatch, refusal)
    journaled, _, words = guard(run_dir, restarts)
    jobs = fake_slurm.load(path)["jobs"]
    assert (jobs["1500"]["state"] == "PENDING") == requeued, words
    assert (journaled and journaled.event) == event
    assert sorted(jobs) == ["1000", "1500", "50"]  # nothing queued
    assert ("tries again once Slurm has requeued it" in words) == requeued


def test_a_requeued_guard_continues_the_chain_once_a_job_ended(tmp_path, monkeypatch):
    run_dir, path = refused_link(tmp_path, monkeypatch, "limit")
    guard(run_dir)
    status = rc.chain_status(run_dir)
    assert "your job limit refused its successor" in status["verdict"], status["verdict"]
    assert status["verdict_word"] == "waiting"  # its guard continues it
    cluster = fake_slurm.load(path)
    cluster["jobs"]["50"]["state"] = "COMPLETED"  # a slot frees
    cluster["jobs"]["1500"]["state"] = "RUNNING"  # Slurm starts the requeued guard
    fake_slurm.save(path, cluster)
    journaled, _, words = guard(run_dir)
    assert journaled.event == "healed" and "continued with job 2000" in words, words
    assert rc.StateStore(run_dir).read_record().successor == "2000"


def set_state(path, job_id, state, preempt_time="None"):
    cluster = fake_slurm.load(path)
    cluster["jobs"][job_id].update(state=state, preempt_time=preempt_time)
    fake_slurm.save(path, cluster)


PREEMPTED = "2026-11-30T03:00:10"  # scontrol's PreemptTime: COMPLETING meanwhile (seen on
# 22.05.8, 24.11.7, 26.05.3), PREEMPTED after


@pytest.mark.parametrize("state, preempt_time, restarts, requeued, said", [
    ("COMPLETING", PREEMPTED, None, True, "preempted: it looks again once Slurm has requeued it"),
    ("RUNNING", PREEMPTED, None, True, "preempted: it looks again once Slurm has requeued it"),
    ("COMPLETING", PREEMPTED, rc.GUARD_REQUEUES, False, "it ended COMPLETING"),
    ("COMPLETING", "None", None, False, "it ended COMPLETING"),  # a person's: it goes
], ids=["preempted while sbatch fails", "preempted with a grace time", "preempted too often",
        "cancelled by a person"])
def test_a_guard_sent_sigterm_while_its_sbatch_fails_requeues_itself_only_when_preempted(
        tmp_path, monkeypatch, state, preempt_time, restarts, requeued, said):
    """Chaos run 13: both guards of two chains were preempted between their tries (sbatch was
    out): nothing looked again. Slurm's SIGTERM ends a guard's pause (sleep_until_term)."""
    run_dir, path = refused_link(tmp_path, monkeypatch, "other")
    pauses = []

    def sigterm(seconds):
        pauses.append(seconds)
        set_state(path, "1500", state, preempt_time)
        return True
    environ = dict({"SLURM_JOB_ID": "1500"}, **({"SLURM_RESTART_COUNT": str(restarts)}
                                               if restarts is not None else {}))
    journaled, _, words = rc.guard_chain(run_dir, "1000", environ, sleep=sigterm,
                                         clock=histories.OwnClock())
    assert (fake_slurm.load(path)["jobs"]["1500"]["state"] == "PENDING") == requeued, words
    assert journaled is None and words.endswith("trying again; " + said), words
    assert pauses == [rc.RETRY_DELAYS[0]]


def test_a_queued_guard_hears_slurms_sigterm_and_requeues_itself_when_preempted(
        tmp_path, monkeypatch):
    """The wrap as sbatch writes it, run in a process group of its own as slurmstepd does: SIGTERM
    to all of it, SIGKILL to what is left once the script ended. Without exec its shell dies
    first; without the blocked signal the guard does."""
    run_dir, path = refused_link(tmp_path, monkeypatch, "other")
    cluster = fake_slurm.load(path)
    error = cluster.pop("sbatch_error")
    fake_slurm.save(path, cluster)
    guard, _ = rc.queue_guard("1000", run_dir, "job.sh", {})
    cluster = fake_slurm.load(path)
    cluster["sbatch_error"] = error
    cluster["jobs"][guard]["state"] = "RUNNING"
    fake = FakeCluster(str(tmp_path / "slurm"))
    fake.save(cluster)
    script, log = str(tmp_path / "wrap.sh"), str(tmp_path / "guard.log")
    with open(script, "w") as handle:
        handle.write("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n%s\n"
                     % cluster["jobs"][guard]["wrap"])
    with open(log, "w") as output:
        process = subprocess.Popen(["/bin/sh", script], env=fake.env(guard), stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 30
        while not fake.calls("sbatch") and time.time() < deadline:  # its first try failed
            time.sleep(0.1)
        time.sleep(0.5)  # it pauses 10 s before the next
        fake.set_job(guard, state="COMPLETING", preempt_time=PREEMPTED)
        os.killpg(process.pid, signal.SIGTERM)
        status = process.wait(timeout=8)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    words = read(str(tmp_path), "guard.log")
    assert status == 0 and fake.job(guard)["state"] == "PENDING", (status, words)
    assert "preempted: it looks again once Slurm has requeued it" in words, words


@pytest.mark.parametrize("command, hang, queued", [
    ("sbatch", 3, True),  # rate-limited: slow, not refused (SBATCH_TIMEOUT_FACTOR)
    ("sbatch", 30, False),  # past it: an outage the link's guard covers
], ids=["slower than a query may be", "past sbatch's own timeout"])
def test_a_slow_sbatch_is_waited_for_longer_than_a_query(cluster, run_dir, command, hang,
                                                         queued):
    cluster.update(hang={command: hang})
    script = cluster.write_script(run_dir)
    result = cluster.run_link(script, 100, RESUMABLE_CHAIN_COMMAND_TIMEOUT=2)
    assert result.returncode == 0 and cluster.work_done() == ["100"], result.stderr
    assert bool(cluster.pending()) == queued, result.stderr
    assert ("sbatch timed out after 6 s" in result.stderr) != queued


@pytest.mark.parametrize("tasks, spec", [
    ([3], "3"), ([0, 1, 2, 5], "0-2,5"), ([1, 3, 5, 6, 7], "1,3,5-7"), ([], ""),
])
def test_tasks_are_written_as_sbatch_takes_an_array(tasks, spec):
    assert rc.array_spec(tasks) == spec
    assert not tasks or rc.parse_array(spec, 1001)[0] == tasks


@pytest.mark.parametrize("allowed, said", [
    (4, "task 2: sbatch: error: Batch job submission failed: Job violates accounting/QOS policy"
        " (job submit limit, user's size and/or time limits); tasks 0-1 are queued: submit the "
        "rest with --array=2-3,7"),
    (0, "task 0: sbatch: error: Batch job submission failed: Job violates accounting/QOS policy"
        " (job submit limit, user's size and/or time limits); nothing is queued: submit the rest"
        " with --array=0-3,7"),
], ids=["half-way", "at the first task"])
def test_a_sweep_refused_half_way_says_which_tasks_are_queued_and_how_to_submit_the_rest(
        cluster, tmp_path, capsys, monkeypatch, allowed, said):
    # Jobs of the user queued after submit looked at the limits: sbatch refuses.
    cluster.update(jobs_allowed=allowed)
    sweep, (status, out, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch,
                                             "--array=0-3,7")
    assert status == 2 and err.splitlines()[-1] == "resumable-chain: error: " + said, err
    assert sorted(os.listdir(sweep) if os.path.exists(sweep) else []) == ["0", "1"][:allowed // 2]


def test_a_link_refused_by_the_job_limit_works_and_its_guard_continues_the_chain_at_its_end(
        cluster, tmp_path, capsys, monkeypatch):
    # The e2e scenario on the fake: the limit is full while the first link runs (itself and its
    # guard); its end frees its slot, which its guard takes for the next link.
    script = tmp_path / "plain.sbatch"
    script.write_text(SWEEP_SCRIPT)
    run_dir = str(tmp_path / "r")
    assert run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "--python", sys.executable,
                   str(script))[0] == 0
    cluster.update(jobs_allowed=2)
    result = cluster.run_link(os.path.join(run_dir, "resumable-plain.sbatch"), "1000")
    assert result.returncode == 0 and rc.JOB_LIMIT_REFUSAL in result.stderr, result.stderr
    assert cluster.pending() == [] and result.stdout.strip() == "work"  # it worked all the same
    status = rc.chain_status(run_dir)
    assert status["verdict_word"] == "running", status["verdict"]  # its guard covers it
    cluster.finish("1000", "TIMEOUT", 60)
    result = cluster.run_guard("1000")
    assert rc.CONTINUED_WITH + "1001" in result.stdout + result.stderr
    assert cluster.pending() == ["1001"] and not cluster.job("1001")["held"]
    result = cluster.run_link(os.path.join(run_dir, "resumable-plain.sbatch"), "1001",
                              predecessor="1000", RESUMABLE_CHAIN_NAMED="1")
    assert result.returncode == 0, result.stderr
    cluster.finish("1001", "COMPLETED", 5)
    roles = dict((row["job"], row["role"]) for row in rc.chain_status(run_dir)["jobs"])
    assert (roles["1000"], roles["1001"]) == ("link", "link"), roles  # queued by a guard, ran
