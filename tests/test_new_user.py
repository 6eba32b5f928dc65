"""What a new user tripped over (issue 30): one ``finished`` per chain, cancel of an ended chain,
a new chain's own events, pending reasons that never clear, job names and working directories,
every job of the chain in ``status``, and the words of the command line."""
import json
import os
import subprocess
import sys

import pytest

import resumable_chain as rc
import fake_slurm
from fake_cluster import BY_PATH, read, run_cli, start_chain
from test_operations import (collection_chain, failed_chain, notified, notify_chain,
                             one_chain_on_a_budget, write)


@pytest.mark.parametrize("force", [False, True], ids=["submit", "submit --force"])
def test_a_new_chain_in_an_old_directory_starts_without_the_old_chains_events(
        cluster, run_dir, tmp_path, capsys, monkeypatch, force):
    failed_chain(cluster, run_dir)
    old = read(run_dir, rc.EVENTS_FILE)
    assert '"failed"' in old
    write(os.path.join(run_dir, "checkpoint.pt"), "step 14")  # the work's: README says it stays
    script = write(str(tmp_path / "s.sh"), "#!/bin/bash\ntrue\n")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir,
                               *(["--force"] if force else []) + [script])
    assert status == 0, err
    assert not os.path.exists(os.path.join(run_dir, rc.EVENTS_FILE))
    assert read(run_dir, rc.EVENTS_FILE + rc.PREVIOUS_SUFFIX) == old  # kept with the others
    assert read(run_dir, "checkpoint.pt") == "step 14" and not os.path.exists(
        os.path.join(run_dir, "checkpoint.pt" + rc.PREVIOUS_SUFFIX))
    report = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    assert report["events"] == []


def test_the_files_kept_as_prev_are_all_the_last_chains(cluster, run_dir, tmp_path, capsys,
                                                        monkeypatch):
    # New-user trial: after a third submit, .gym_job_chain.prev named the second chain, but the
    # events kept as *.prev were the first's ("failed"): the second had none to keep.
    failed_chain(cluster, run_dir)
    script = write(str(tmp_path / "s.sh"), "#!/bin/bash\ntrue\n")
    second = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "--python", sys.executable,
                     script)[1].strip()
    assert cluster.run_link(os.path.join(run_dir, "resumable-s.sh"), second).returncode == 0
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "--force", script)
    assert status == 0, err
    assert read(run_dir, rc.CHAIN_FILE + rc.PREVIOUS_SUFFIX) == second + "\n"
    assert not os.path.exists(os.path.join(run_dir, rc.EVENTS_FILE + rc.PREVIOUS_SUFFIX))
    # A trial on 24.11: the submit record was overwritten, not kept with the others.
    assert json.loads(read(run_dir, rc.SUBMIT_FILE + rc.PREVIOUS_SUFFIX))["first_job"] == second
    assert json.loads(read(run_dir, rc.SUBMIT_FILE))["first_job"] == out.strip()


def ended_chain(cluster, run_dir, capsys, monkeypatch, how):
    """A chain that ended ``how``: finished, stopped (cancelled before), failed, broken."""
    if how == "failed":
        return failed_chain(cluster, run_dir)
    script, successor = start_chain(cluster, run_dir)
    if how == "finished":
        cluster.finish(100, "COMPLETED", 5)
        cluster.set_job(successor, state="CANCELLED", start="None")
    elif how == "broken":  # its successor died at launch and its guard is gone: nothing queued
        cluster.finish(100, "TIMEOUT", 60)
        cluster.finish(successor, "NODE_FAIL", 0)
        for guard in cluster.guards().values():
            cluster.set_job(guard, state="CANCELLED", start="None")
    else:
        assert run_cli(cluster, capsys, monkeypatch, "cancel", run_dir)[0] == 0


@pytest.mark.parametrize("how,words", [
    ("finished", "already finished (job 100 COMPLETED): nothing to cancel"),
    ("stopped", "already stopped (cancelled with the cancel command ("),
    ("failed", "already failed (predecessor FAILED: retry 1 exceeds max_retries 0"),
], ids=["finished", "stopped", "failed"])
@pytest.mark.parametrize("dry_run", [False, True], ids=["cancel", "cancel --dry-run"])
def test_cancel_leaves_a_chain_that_ended_as_it_is(cluster, run_dir, capsys, monkeypatch, how,
                                                   words, dry_run):
    ended_chain(cluster, run_dir, capsys, monkeypatch, how)
    before = {name: read(run_dir, name) for name in os.listdir(run_dir) if name != rc.LOCK_FILE}
    verdict = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    scancels = len(cluster.calls("scancel"))
    status, out, err = run_cli(cluster, capsys, monkeypatch, "cancel", run_dir,
                               *["--dry-run"][:dry_run])
    assert (status, err) == (0, "")
    assert out.startswith(words) and out.endswith(": nothing to cancel\n")
    assert len(cluster.calls("scancel")) == scancels
    after = {name: read(run_dir, name) for name in os.listdir(run_dir) if name != rc.LOCK_FILE}
    assert after == before  # no cancel mark, no event
    again = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    assert again["verdict"] == verdict["verdict"]


def test_a_trap_that_saw_status_0_before_slurm_recorded_failed_is_not_a_finished_work(
        cluster, run_dir):
    # bash runs its EXIT trap with status 0 when a signal kills it too (--signal=B:USR1@60 and
    # no handler: the batch shell dies while the controller says RUNNING): the work is not done.
    script, successor = notify_chain(cluster, run_dir)
    assert cluster.run_link(script, 100).returncode == 0
    cluster.finish(100, "FAILED", 63)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 0, result.stderr
    assert "job %s: resume | predecessor 100 FAILED" % successor in result.stderr
    assert "retry 1 of 3" in result.stderr
    assert successor in cluster.work_done()


def test_work_that_exits_0_just_after_its_time_limit_finishes_the_chain_once(
        cluster, run_dir, capsys, monkeypatch):
    # Seen on Slurm 26.05: work `sleep 63; exit 0` under --time=1 ended before the limit sweep
    # killed it; its exit trap saw the job RUNNING and said finished, then Slurm recorded TIMEOUT
    # and the successor started.
    script, successor = notify_chain(cluster, run_dir)
    assert cluster.run_link(script, 100).returncode == 0  # the rerun's work exits 0
    cluster.finish(100, "TIMEOUT", 63)
    result = cluster.run_link(script, successor, predecessor=100)
    assert result.returncode == 0, result.stderr
    assert "job %s: complete | predecessor 100 TIMEOUT" % successor in result.stderr
    assert successor not in cluster.work_done()  # no work, no successor of its own
    assert cluster.pending() == []
    cluster.finish(successor, "COMPLETED", 1)
    for _ in range(2):
        report = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    assert notified(cluster) == [("finished", "100", "1")]
    assert [(event["event"], event["job"]) for event in report["events"]] == [("finished", "100")]
    assert report["verdict"] == (
        "finished: job 100's work exited 0 (its exit trap said so) though Slurm recorded "
        "TIMEOUT; job %s, queued before the work ended, found nothing left to do" % successor)
    assert report["next"] is None and report["links"] == 1


@pytest.mark.parametrize("reason,never", [
    ("BadConstraints", True),  # resume --mem 100000G on the 26.05 cluster
    ("PartitionConfig", True),
    ("InvalidQOS", True),
    ("QOSMaxWallDurationPerJobLimit", True),
    ("AssocMaxCpuPerJobLimit", True),
    ("AssocMaxJobsLimit", False),  # clears as the user's other jobs end
    ("QOSGrpCpuLimit", False),
    ("Constraints", False),  # 26.05: later node updates may satisfy them
    ("Priority", False),
])
def test_a_link_pending_for_a_reason_that_never_clears_needs_a_person(
        cluster, run_dir, capsys, monkeypatch, reason, never):
    failed_chain(cluster, run_dir)
    status, out, err = run_cli(cluster, capsys, monkeypatch, "resume", run_dir, "--mem", "100000G")
    assert status == 0, err
    cluster.set_job(out.strip(), reason=reason)
    checked = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check")
    assert checked[0] == int(never)
    [row] = [line for line in checked[1].splitlines() if line.startswith(out.strip() + " ")]
    assert row.endswith("queued by the resume command, pending: %s%s" % (
        reason, " (%s: it never starts by itself)" % rc.never_starts(reason) if never else ""))
    report = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    if never:
        assert report["verdict"].startswith("waiting: job %s is pending (%s) and never starts "
                                            "by itself: " % (out.strip(), reason))
        assert report["next"].startswith("fix its request (scontrol update JobId=%s ...), or "
                                         "%s cancel " % (out.strip(), BY_PATH))
    else:
        assert report["verdict"] == "waiting: job %s is pending (%s)" % (out.strip(), reason)
        assert report["next"] is None


def test_a_first_job_that_never_starts_is_submitted_again_not_resumed(cluster, run_dir, tmp_path,
                                                                      capsys, monkeypatch):
    """A new user's trial: submit --mem=999G; status said to cancel then resume, and resume
    refused (the first job never ran)."""
    script = os.path.join(str(tmp_path), "job.sh")
    with open(script, "w") as handle:
        handle.write("#!/bin/bash\n#SBATCH --time=10\necho work\n")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "--mem=999G",
                               "--", script)
    assert status == 0, err
    first = out.strip().split()[-1]
    cluster.set_job(first, reason="BadConstraints")
    checked = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check", "--json")
    report = json.loads(checked[1])
    assert checked[0] == 1
    assert report["verdict"].startswith("waiting: job %s, the chain's first job, is pending "
                                        "(BadConstraints) and never starts by itself: " % first)
    assert "submit the chain again" in report["next"] and "resume" not in report["next"]


@pytest.mark.parametrize("words,message", [
    (["render", "r", "-p", "debug"], "unrecognized arguments: -p debug; sbatch options for every "
     "successor go after --: %s render DIR [OPTIONS] -- -p debug (see --help)" % BY_PATH),
    (["render", "r", "--max-retry", "2"], "--max-retry 2 (did you mean --max-retries?)"),
    (["status", "r", "--jsn"], "--jsn (did you mean --json?)"),
    (["status"], "the following arguments are required: DIR"),
    (["budget", "b", "--max-walltime", "4h"], "invalid walltime '4h'"),
    (["submit", "r", "--max-retry", "2", "s.sh"], "unknown option --max-retry (did you mean "
     "--max-retries?)"),
    (["resume", "r", "--max-retry", "2"], "unknown option --max-retry (did you mean "
     "--max-retries?)"),
    (["submit", "r", "--wrap", "echo hi"], "sbatch option '--wrap' is not allowed in a chain: a "
     "chain resubmits a job script"),  # issue 40: it said "give DIR first"
    (["resume", "--max-retries", "3"], "the following arguments are required: DIR"),  # it said
    # "--max-retries is neither ours nor an sbatch option"
], ids=["render's sbatch options before --", "render --max-retry", "status --jsn",
        "status without DIR", "budget with a bad walltime",
        "submit --max-retry", "resume --max-retry", "submit --wrap", "resume without DIR"])
def test_a_mistyped_command_line_says_what_was_meant(cluster, capsys, monkeypatch, words,
                                                     message):
    status, out, err = run_cli(cluster, capsys, monkeypatch, *words)
    assert status == 2 and message in err and err.count("\n") == 1 and out == ""
    assert err.startswith("resumable-chain: error: %s: " % words[0]), err  # the command, once
    assert "error: resumable-chain" not in err, err  # not "resumable-chain: error: resumable-..."


def test_help_lists_every_notify_event(capsys):
    assert rc.main(["submit", "--help"]) == 0
    assert "(%s)" % ", ".join(rc.EVENTS) in " ".join(capsys.readouterr().out.split())
    assert "healed" in rc.EVENTS


def test_resume_of_a_chain_whose_first_job_never_ran_says_to_submit_it_again(
        cluster, tmp_path, capsys, monkeypatch):
    script = write(str(tmp_path / "train.sh"), "#!/bin/bash\ntrue\n")
    run_dir = str(tmp_path / "r")
    assert run_cli(cluster, capsys, monkeypatch, "submit", run_dir, script)[0] == 0
    assert run_cli(cluster, capsys, monkeypatch, "cancel", run_dir)[0] == 0
    report = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    status, out, err = run_cli(cluster, capsys, monkeypatch, "resume", run_dir)
    assert status == 2 and out == ""
    assert err == "resumable-chain: error: nothing to resume in %s: %s\n" % (run_dir,
                                                                             report["next"])
    assert "submit %s --force" % run_dir in err


@pytest.mark.parametrize("how,words", [
    ("failed", "after the chain failed (job 1000)"),
    ("cancelled", "after job 1000 ended CANCELLED"),
])
def test_a_resumed_link_says_what_it_resumed_after(cluster, run_dir, capsys, monkeypatch, how,
                                                    words):
    if how == "failed":
        failed_chain(cluster, run_dir)
    else:
        script, successor = start_chain(cluster, run_dir)
        cluster.finish(100, "TIMEOUT", 60)
        assert cluster.run_link(script, successor, predecessor=100).returncode == 0
        assert run_cli(cluster, capsys, monkeypatch, "cancel", run_dir)[0] == 0
    assert run_cli(cluster, capsys, monkeypatch, "resume", run_dir)[0] == 0
    reason = json.loads(read(run_dir, rc.JOURNAL_FILE))["reason"]
    assert reason == "resumed with the resume command " + words


def test_a_collection_shows_a_shared_budget_in_the_walltime_column(cluster, tmp_path, capsys,
                                                                   monkeypatch):
    budget_dir, script = one_chain_on_a_budget(cluster, tmp_path, capsys, monkeypatch, "10")
    assert cluster.run_link(script, 100).returncode == 0
    monkeypatch.chdir(str(tmp_path))
    out = run_cli(cluster, capsys, monkeypatch, "status", "a", "a")[1]
    assert out.splitlines()[1].startswith("a ")
    assert " 00:00:00/- (budget 00:00:00 of 00:10:00 left) " in out.splitlines()[1]


def test_two_chains_of_one_script_are_told_apart_in_squeues_8_characters(
        cluster, tmp_path, capsys, monkeypatch):
    script = write(str(tmp_path / "train.sh"), "#!/bin/bash\ntrue\n")
    for name in ("gpqa", "mmlu-pro"):
        run_dir = str(tmp_path / "runs" / name)
        status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "--python",
                                   sys.executable, script)
        assert status == 0, err
        first = out.strip()
        copy = os.path.join(run_dir, "resumable-train.sh")
        assert cluster.run_link(copy, first, SLURM_JOB_NAME=cluster.job(first)["name"],
                                SLURM_JOB_PARTITION="debug").returncode == 0
    shown = sorted((job["name"][:8], bool(job.get("wrap")))  # as default squeue shows NAME
                   for job in cluster.load()["jobs"].values())
    assert shown == [("g:gpqa", True)] * 2 + [("g:mmlu-p", True)] * 2 + [  # first job's, next's
        ("gpqa", False), ("gpqa", False), ("mmlu-pro", False), ("mmlu-pro", False)]
    assert all(name.startswith(rc.GUARD_PREFIX) == guard for name, guard in shown)


def status_rows(cluster, capsys, monkeypatch, run_dir):
    """{job: (role, state, note)} of status --json, and the text status prints."""
    report = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    return ({row["job"]: (row["role"], row["state"], row["note"]) for row in report["jobs"]},
            run_cli(cluster, capsys, monkeypatch, "status", run_dir)[1])


def test_status_shows_a_guard_that_ran_after_a_person_cancelled_the_successor(
        cluster, run_dir, capsys, monkeypatch):
    script, successor = start_chain(cluster, run_dir)  # link 100 runs on
    cluster.set_job(successor, state="CANCELLED by 0", end="2026-11-30T01:30:00")
    guard = cluster.guards()[successor]
    assert cluster.run_guard(successor).returncode == 0
    rows, text = status_rows(cluster, capsys, monkeypatch, run_dir)
    did = ("job %s, the pending successor of job 100, was cancelled before it started "
           "(CANCELLED by root (uid 0)): the chain stops when job 100 ends" % successor)
    assert rows == {"100": ("link", "RUNNING", None),
                    successor: ("successor", "CANCELLED by 0", "CANCELLED by root (uid 0)"),
                    guard: ("guard", "COMPLETED", "ran once job %s ended: %s" % (successor, did))}
    assert "guard: job %s ran (COMPLETED): %s\n" % (guard, did) in text  # told in the past
    assert "continues the chain if the successor dies" not in text
    [row] = [line for line in text.splitlines() if line.startswith(guard + " ")]
    assert row.split()[1:3] == ["guard", "COMPLETED"]
    cluster.set_job(guard, state="CANCELLED by 0")  # say a person cancelled it instead
    os.remove(os.path.join(run_dir, rc.GUARD_LOG))
    text = status_rows(cluster, capsys, monkeypatch, run_dir)[1]  # it may never have run
    assert "guard: job %s ended (CANCELLED by root (uid 0)): see %s\n" % (guard, rc.GUARD_LOG) \
        in text, text


def test_status_of_a_guard_cancelled_before_it_ran_sends_no_one_to_its_empty_log(
        cluster, run_dir, capsys, monkeypatch):
    """A new user's trial on 24.11: scancel of a pending guard, then status said "see
    .resumable_chain.guard.log", which was empty: that guard never ran."""
    script, successor = start_chain(cluster, run_dir)  # link 100 runs on
    guard = cluster.guards()[successor]
    cluster.set_job(guard, state="CANCELLED by 1000", start="None", nodes=None)
    text = status_rows(cluster, capsys, monkeypatch, run_dir)[1]
    assert "guard: job %s ended (CANCELLED by " % guard in text, text
    assert "): it never started\n" in text and rc.GUARD_LOG not in text, text


def test_status_shows_a_dead_successor_its_guard_and_the_replacement(cluster, run_dir, capsys,
                                                                     monkeypatch):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "FAILED", 60)
    cluster.set_job(100, exit_code="75:0")  # the work asked to be resumed
    cluster.set_job(successor, state="NODE_FAIL", start="2026-11-30T01:01:00",
                    end="2026-11-30T01:01:00")
    guard = cluster.guards()[successor]
    assert cluster.run_guard(successor).returncode == 0
    [new] = cluster.pending()
    rows, text = status_rows(cluster, capsys, monkeypatch, run_dir)
    assert rows["100"] == ("link", "FAILED", "exit 75: not a failure: no retry counted")
    assert rows[successor] == ("dead successor", "NODE_FAIL", "died before its prologue; job %s "
                               "replaced it" % new)
    assert rows[guard][:2] == ("guard", "COMPLETED")
    assert rows[guard][2].startswith("ran once job %s ended: job %s died before its prologue"
                                     % (successor, successor))
    assert rows[new][:2] == ("replacement", "PENDING")
    assert rows[new][2].startswith("queued by guard %s" % guard)
    new_guard = cluster.guards()[new]
    assert rows[new_guard] == ("guard", "PENDING", "continues the chain if job %s dies before "
                               "its prologue" % new)
    assert list(rows) == sorted(rows, key=int)


@pytest.mark.parametrize("state,exit_code,note", [
    ("COMPLETED", "0:0", "exit 0: the work is done"),
    ("FAILED", "75:0", "exit 75: not a failure: no retry counted"),
    ("FAILED", "76:0", "exit 76: the work stopped the chain"),
    ("FAILED", "1:0", "exit 1: a failure, retried while retries are left"),
    ("TIMEOUT", "0:15", "SIGTERM: not a failure: no retry counted"),
    ("NODE_FAIL", "0:0", "not a failure: no retry counted"),
    ("OUT_OF_MEMORY", "0:125", "ExitCode 0:125: a failure, retried while retries are left"),
])
def test_an_ended_link_shows_its_exit_and_what_it_meant(cluster, run_dir, capsys, monkeypatch,
                                                        state, exit_code, note):
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, state, 60)
    cluster.set_job(100, exit_code=exit_code)
    rows, text = status_rows(cluster, capsys, monkeypatch, run_dir)
    assert rows["100"] == ("link", state, note)
    report = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    assert [row["exit_code"] for row in report["jobs"] if row["job"] == "100"] == [exit_code]


def test_cancel_marks_a_chain_a_person_stopped_with_scancel_so_a_new_job_starts_fresh(
        cluster, run_dir, capsys, monkeypatch):
    # A person scancelled the running link and its pending successor: the journal still shows
    # a working link, so a new first job would wait for the journal to name it. cancel writes
    # the mark that ends the chain (a second cancel says so), and the new job starts at once.
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "CANCELLED by 0", 5)
    cluster.set_job(successor, state="CANCELLED by 0", end="2026-11-30T01:30:00")
    for guard in cluster.guards().values():  # scancel -u: its guard too
        cluster.set_job(guard, state="CANCELLED by 0", end="2026-11-30T01:30:00")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "cancel", run_dir)
    assert status == 0 and out == ("cancelled: nothing was queued or running; the chain is "
                                   "marked cancelled (a new job here starts a new chain)\n"), out
    assert os.path.exists(os.path.join(run_dir, rc.CANCEL_FILE))
    assert "already stopped" in run_cli(cluster, capsys, monkeypatch, "cancel", run_dir)[1]
    result = cluster.run_link(script, 200)
    assert result.returncode == 0 and "starting fresh" in result.stderr, result.stderr
    assert read(run_dir, rc.CHAIN_FILE) == "200\n"


def test_a_guards_words_with_a_warning_still_name_the_replacement(cluster, run_dir):
    start_chain(cluster, run_dir)
    with open(os.path.join(run_dir, rc.GUARD_LOG), "w") as handle:
        handle.write("resumable-chain: 2026-11-30T02:00:00 guard 900000 of job 1000: job 1000 "
                     "died before its prologue (NODE_FAIL on vm)%s1002; WARNING: could not "
                     "queue a guard for job 1002 (x)\n" % rc.CONTINUED_WITH)
    chain = rc.chain_in(run_dir).whole()
    roles = rc._roles(chain, rc.STATUS_ROWS)[1]
    assert roles["1002"] == ("successor", "queued by guard 900000")  # not "1002;": lost


def test_submit_again_keeps_the_warning():
    words = rc._submit_again({"original": "/x/job.sh", "warn": "USR1@120", "max_retries": 3},
                             "runs/a")
    assert "--warn USR1@120" in words


@pytest.mark.parametrize("notify, trapped", [([], False), (["--notify", "true"], True)],
                         ids=["submit", "submit --notify"])
def test_submit_gives_the_first_job_the_finished_trap_only_with_a_notify_command(
        cluster, run_dir, tmp_path, capsys, monkeypatch, notify, trapped):
    # The trap tells the next link that a work which exited 0 just past its limit is done
    # (Slurm records TIMEOUT); without a notify command, that link runs the work once more.
    script = write(str(tmp_path / "s.sh"), "#!/bin/bash\ntrue\n")
    status, _, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, *notify + [script])
    assert status == 0, err
    copy = read(run_dir, "resumable-s.sh")
    assert ("trap resumable_chain_finished EXIT" in copy) == trapped


@pytest.mark.parametrize("how", ["finished", "stopped"])
def test_status_check_fails_for_an_ended_chain_with_a_corrupt_state_file(
        cluster, run_dir, capsys, monkeypatch, how):
    # A new user's trial on 22.05: 'abc' in .gym_infra_retries of a stopped chain, status
    # warned and said what to do, but --check exited 0 (the README says 1).
    ended_chain(cluster, run_dir, capsys, monkeypatch, how)
    with open(os.path.join(run_dir, rc.RETRIES_FILE), "w") as handle:
        handle.write("abc\n")
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check")
    assert status == 1 and "WARNING" in out and rc.RETRIES_FILE in out, out
    assert run_cli(cluster, capsys, monkeypatch, "status", run_dir)[0] == 0  # a look, no check


@pytest.mark.parametrize("elapsed, ends", [(2, True), (59, True), (60, False), (3600, False)],
                         ids=["2 s: a loop", "59 s: a loop", "a minute: progress",
                              "an hour: progress"])
def test_a_work_that_exits_75_within_a_minute_counts_a_retry_so_its_loop_ends(
        cluster, run_dir, capsys, monkeypatch, elapsed, ends):
    script, successor = start_chain(cluster, run_dir, max_retries=1)
    links = ["100", successor]
    for _ in range(2):
        cluster.finish(links[-2], "FAILED", elapsed)
        cluster.set_job(links[-2], exit_code="75:0")  # e.g. a checkpoint it cannot load
        result = cluster.run_link(script, links[-1], predecessor=links[-2])
        if result.returncode:
            break
        links.append(cluster.pending()[-1])
    record = json.loads(read(run_dir, rc.JOURNAL_FILE))
    if not ends:  # the seed's meaning: resumed, no retry counted
        assert (result.returncode, record["retries"], record["cause"]) == (0, 0, None)
        return
    assert (result.returncode, record["retries"], record["cause"]) == (1, 2, "no_progress")
    assert "exit 75 after only %d s (no progress: counted as a retry)" % elapsed in result.stderr
    status = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    assert status["verdict"].startswith("failed: predecessor FAILED with exit 75 after only")
    assert [row["note"] for row in status["jobs"] if row["job"] == links[1]] == [
        "exit 75: no progress (under a minute): the failure that exhausted the retries"]


CONSOLE_SCRIPT = "#!%s\nimport sys\nsys.path.insert(0, %r)\nfrom resumable_chain import main\n" \
    "sys.exit(main())\n"  # what pip writes for the resumable-chain entry point


@pytest.mark.parametrize("how, named", [
    ("a copied file run by path", "python3 '{copy}'"),
    ("a copied file run with python3 -m", "python3 '{copy}'"),
    ("the console script PATH finds", "resumable-chain"),
    ("the console script by a path not on PATH", "'{script}'"),
])
def test_messages_name_the_command_as_the_user_ran_it(tmp_path, how, named):
    # Issue 40: `next:` lines said resumable-chain, which a file copied as the Quick start says
    # is not: 'command not found'. The named command is quoted for the shell (a space here).
    home = tmp_path / "my tools"
    home.mkdir()
    copy = str(home / "resumable_chain.py")
    with open(rc.__file__) as source, open(copy, "w") as target:
        target.write(source.read())
    script = home / "bin" / "resumable-chain"
    script.parent.mkdir()
    script.write_text(CONSOLE_SCRIPT % (sys.executable, str(home)))
    script.chmod(0o755)
    path = (str(script.parent) + os.pathsep if how.endswith("PATH finds") else "") + \
        os.environ["PATH"]
    argv = {"a copied file run by path": [sys.executable, copy],
            "a copied file run with python3 -m": [sys.executable, "-m", "resumable_chain"],
            "the console script PATH finds": ["resumable-chain"]}.get(how, [str(script)])
    result = subprocess.run(argv + ["budget", str(tmp_path)], cwd=str(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True,
                            env=dict(os.environ, PATH=path))
    assert result.returncode == 2
    named = named.format(copy=copy, script=script)
    assert "no shared budget in %s: create it with %s budget %s --max-walltime T" % (
        tmp_path, named, rc.shell_quote(str(tmp_path))) in result.stderr, result.stderr
    helped = subprocess.run(argv + ["submit", "--help"], cwd=str(home), stdout=subprocess.PIPE,
                            universal_newlines=True, env=dict(os.environ, PATH=path)).stdout
    for words in ("usage: %s submit DIR", "example: %s submit runs/a",
                  "created with: %s budget B --max-walltime T"):  # argparse wraps, even at "-"
        assert "".join((words % named).split()) in "".join(helped.split()), helped


def submitted_chain(cluster, run_dir, tmp_path, capsys, monkeypatch):
    script = write(str(tmp_path / "train.sbatch"), "#!/bin/bash\n#SBATCH --time=10\ntrue\n")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, script)
    assert status == 0, err
    return out.strip()


def test_a_pending_first_jobs_guard_line_says_what_its_row_says(cluster, run_dir, tmp_path,
                                                                capsys, monkeypatch):
    # Issue 40: the row said "replaces job 209 if it dies before its prologue", the guard line
    # "continues the chain if the successor dies" beside "pending successor: none".
    first = submitted_chain(cluster, run_dir, tmp_path, capsys, monkeypatch)
    text = run_cli(cluster, capsys, monkeypatch, "status", run_dir)[1]
    covers = "replaces job %s if it dies before its prologue" % first
    [guard] = [line.split()[0] for line in text.splitlines() if " guard " in line]
    assert "guard: job %s PENDING (%s)\n" % (guard, covers) in text and "successor dies" not in text
    assert "lock:" not in text  # the kernel's lock, the common case, goes unsaid


def test_a_long_name_of_who_cancelled_keeps_the_status_columns(cluster, run_dir, capsys,
                                                               monkeypatch):
    # Issue 40: "CANCELLED by trial1 (uid 2104)" overflowed the STATE column.
    script, successor = start_chain(cluster, run_dir)
    cluster.set_job(successor, state="CANCELLED by 2104", end="2026-11-30T01:30:00")
    monkeypatch.setattr(rc, "uid_name", lambda uid: "a-colleague-with-a-long-name")
    lines = run_cli(cluster, capsys, monkeypatch, "status", run_dir)[1].splitlines()
    header = next(line for line in lines if line.startswith("JOBID "))
    rows = [line for line in lines if line.split(" ")[0] in ("100", successor)]
    assert "CANCELLED by a-colleague-with-a-long-name (uid 2104)" in rows[1]
    start = header.index("START")  # every row's START where the header's is
    assert [row[start - 2:start] + row[start] in ("  -", "  2") for row in rows] == [True] * 2


def test_the_last_link_of_a_failed_chain_says_it_exhausted_the_retries(cluster, run_dir, capsys,
                                                                       monkeypatch):
    # Issue 40: it said "a failure, retried while retries are left" (none was left).
    failed_chain(cluster, run_dir)
    rows = status_rows(cluster, capsys, monkeypatch, run_dir)[0]
    assert rows["100"][:2] == ("link", "FAILED")
    assert rows["100"][2].endswith(": the failure that exhausted the retries"), rows["100"]


def test_status_of_a_collection_keeps_to_100_columns(cluster, tmp_path, capsys, monkeypatch):
    # Issue 40: a sweep's status --check was 380 columns wide (the next step in the table,
    # notes on one line). The notes wrap; a next step stays whole, to be copied from one line.
    parent = str(tmp_path / "runs")
    for name, situation in (("a", "running with a pending successor"),
                            ("c", "broken: the successor died before its prologue")):
        collection_chain(cluster, parent, name, situation)
    monkeypatch.chdir(str(tmp_path))
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", "runs", "--check")
    assert status == 1
    steps = [line for line in out.splitlines() if line.startswith("next ")]
    assert steps == ["next runs/c: %s resume %s continues the chain" % (
        BY_PATH, os.path.join(parent, "c"))]
    assert max(len(line) for line in out.splitlines() if line not in steps) <= 100, out


def test_a_notified_reason_names_the_command_as_run(tmp_path, monkeypatch):
    # A guard's "broken" reason says what continues the chain: the webhook gets it runnable.
    heard = str(tmp_path / "heard")
    monkeypatch.setattr(rc, "COMMAND", "python3 /opt/tools/resumable_chain.py")
    event = rc.Event("broken", "100", 1, "not replaced; resumable-chain resume continues the chain",
                     0)
    rc.notify('printf %%s "$RESUMABLE_CHAIN_REASON" > %s' % heard, event, str(tmp_path))
    assert read(str(tmp_path), "heard") == ("not replaced; python3 /opt/tools/resumable_chain.py "
                                            "resume continues the chain")


@pytest.mark.parametrize("queued_by", ["successor", "guard's replacement", "resume"])
def test_every_link_sees_the_directory_submit_ran_in_as_its_submit_dir(
        cluster, tmp_path, capsys, monkeypatch, queued_by):
    # issue 40: with cd "$SLURM_SUBMIT_DIR", link 2 saw the run directory, not train.py's
    project = str(tmp_path / "project")
    os.makedirs(project)
    monkeypatch.chdir(project)
    script = write(os.path.join(project, "train.sbatch"), "#!/bin/bash\n#SBATCH -t 10\ntrue\n")
    run_dir = str(tmp_path / "runs" / "a")
    first = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "--python", sys.executable,
                    script)[1].strip()
    copy = os.path.join(run_dir, "resumable-train.sbatch")
    assert cluster.run_link(copy, first, cwd=run_dir).returncode == 0  # --chdir=run_dir
    [successor] = cluster.pending()
    cluster.finish(first, "TIMEOUT", 600)
    monkeypatch.chdir(str(tmp_path))  # resume and the guard run elsewhere
    if queued_by == "guard's replacement":
        cluster.set_job(successor, state="NODE_FAIL", start="2026-11-30T01:01:00")
        assert cluster.run_guard(successor).returncode == 0
    elif queued_by == "resume":
        cluster.set_job(successor, state="CANCELLED by 0", start="None")
        assert run_cli(cluster, capsys, monkeypatch, "resume", run_dir)[0] == 0
    link = cluster.pending()[-1]
    cluster.run_link(copy, link, predecessor=first, cwd=run_dir)
    assert cluster.job(link)["cwd"] == project
    assert [call["cwd"] for call in cluster.calls("sbatch")] == [project] * len(
        cluster.calls("sbatch"))


UNLIMITED = {"DefaultTime": "NONE", "MaxTime": "UNLIMITED"}


@pytest.mark.parametrize("partitions,options,said", [
    (None, [], "WARNING: no --time in the options or in {script}: the links get partition debug's "
     "default time limit, 01:00:00"),
    ({"debug": {"DefaultTime": "NONE", "MaxTime": "2-00:00:00"}}, [], "partition debug's default "
     "time limit, 2-00:00:00"),
    ({"debug": UNLIMITED, "gpu": {"DefaultTime": "04:00:00", "MaxTime": "UNLIMITED"}},
     ["-p", "gpu"], "partition gpu's default time limit, 04:00:00"),
    ({"debug": UNLIMITED}, [], "error: no --time in the options or in {script}: partition "
     "debug has no time limit (DefaultTime and MaxTime), so no link would ever end"),
    ({"debug": UNLIMITED}, ["--time=UNLIMITED"], None),
    ({"debug": UNLIMITED}, ["-t", "10"], None),
], ids=["the default partition's", "its MaxTime", "the partition asked for", "none at all",
        "unlimited as asked", "a time limit given"])
def test_submit_says_which_time_limit_links_get_when_no_time_is_given(
        cluster, tmp_path, capsys, monkeypatch, partitions, options, said):
    # issue 40: links ran with TIME_LIMIT UNLIMITED: a chain that never times out never chains
    if partitions:
        cluster.update(partitions=partitions)
    script = write(str(tmp_path / "s.sh"), "#!/bin/bash\ntrue\n")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", str(tmp_path / "r"),
                               *(options + [script]))
    if said is None:
        assert status == 0 and "--time" not in err, err
    elif said.startswith("error"):
        assert status == 2 and err.startswith("resumable-chain: " + said.format(script=script))
        assert err.count("\n") == 1
        assert cluster.calls("sbatch") == [] and not os.path.exists(str(tmp_path / "r"))
    else:
        assert status == 0 and err.splitlines()[0].endswith(said.format(script=script)), err
        assert err.count("WARNING") == 1 and "submitted job" in err.splitlines()[1]


@pytest.mark.parametrize("words,warned", [
    (["S", "-p", "debug", "--time=1"], "-p --time=1 after the script S go to the script"),
    (["S", "--lr", "3e-4", "--nodes", "2"], "--nodes after the script S go to the script"),
    (["S", "-t", "2", "-J", "foo", "-N", "1"], "-t -J -N after the script S go to the script"),
    (["S", "--lr", "3e-4", "-c", "config.yaml", "-n", "5"], None),  # a script's words, likely
    (["S", "--lr", "3e-4"], None),
    (["--", "S", "--time=1"], None),  # said to be the script's
], ids=["--time after the script", "--nodes among the script's", "short options (trial on 24.11)",
        "-c and -n: the script's own", "the script's own", "after --"])
def test_submit_warns_of_sbatch_options_after_the_script(cluster, tmp_path, capsys, monkeypatch,
                                                         words, warned):
    script = write(str(tmp_path / "s.sh"), "#!/bin/bash\n#SBATCH --time=5\ntrue\n")
    words = [script if word == "S" else word for word in words]
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", str(tmp_path / "r"), *words)
    assert status == 0, err
    assert err.count("WARNING") == (1 if warned else 0), err
    if warned:
        assert err.startswith("resumable-chain: WARNING: " + warned.replace("S", script)), err
    args = words[words.index(script) + 1:]  # the script's arguments all the same
    assert cluster.calls("sbatch")[-1]["argv"][-len(args):] == args


def test_partition_limits_are_read_as_22_05_prints_them_and_the_fake_prints_the_same():
    path = os.path.join(os.path.dirname(__file__), "slurm_outputs", "22.05", "{}.txt")
    with open(path.format("scontrol-show-partition")) as handle:
        real = "".join(line for line in handle if not line.startswith("# "))
    assert rc.parse_partition(real) == ("debug", None)  # Default=YES, no limit at all
    assert rc.parse_partition(real, "high") == ("high", None)
    assert rc.parse_partition(real, "nosuch") is None
    fake = fake_slurm.PARTITION_LINE % dict(name="debug", default="YES", DefaultTime="NONE",
                                            MaxTime="UNLIMITED")
    assert [word.split("=")[0] for word in fake.split()] == [
        word.split("=")[0] for word in real.splitlines()[0].split()]
    assert rc.parse_partition(fake) == ("debug", None)
    assert rc.parse_partition(fake.replace("DefaultTime=NONE", "DefaultTime=04:00:00")) == (
        "debug", 14400)


def test_the_trials_time_after_the_script_on_a_partition_without_limits_is_refused_and_said(
        cluster, tmp_path, capsys, monkeypatch):
    # issue 40: submit runs/d train.sbatch -p debug --time=1 ran links with TIME_LIMIT UNLIMITED
    cluster.update(partitions={"debug": UNLIMITED})
    script = write(str(tmp_path / "train.sbatch"), "#!/bin/bash\ntrue\n")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", str(tmp_path / "d"),
                               script, "-p", "debug", "--time=1")
    warning, error = err.splitlines()
    assert status == 2 and warning.startswith("resumable-chain: WARNING: -p --time=1 after the script")
    assert "partition debug has no time limit" in error and cluster.calls("sbatch") == []


@pytest.mark.parametrize("warn, ends", [(None, True), ("USR1@90", False)],
                         ids=["unwarned: a loop", "warned 90 s before a 2-minute limit: progress"])
def test_a_warned_work_that_checkpoints_within_its_first_minute_made_progress(
        cluster, run_dir, warn, ends):
    # Review: --time=2 --warn USR1@90 is accepted (check_warn_fits), the warning comes 30 s in,
    # the work saves and exits 75: counted as "no progress", the chain failed after max_retries.
    options = dict(warn=warn) if warn else {}
    script, successor = start_chain(cluster, run_dir, max_retries=0, **options)
    cluster.finish("100", "FAILED", 31)
    cluster.set_job("100", exit_code="75:0", time_limit="00:02:00")
    result = cluster.run_link(script, successor, predecessor="100")
    record = json.loads(read(run_dir, rc.JOURNAL_FILE))
    if ends:
        assert (result.returncode, record["cause"]) == (1, "no_progress"), result.stderr
    else:
        assert (result.returncode, record["action"], record["retries"]) == (0, "resume", 0), \
            result.stderr


def test_warned_checkpoints_under_a_minute_twice_in_a_row_count_so_the_chain_ends(
        cluster, run_dir):
    # Trial on 26.05: --time=1 --warn USR1@50, the work saves nothing in its 10 s and exits 75:
    # each link resumed uncounted, a chain with no progress and no end (but the cap).
    script, successor = start_chain(cluster, run_dir, max_retries=0, warn="USR1@50")
    cluster.finish("100", "FAILED", 12)
    cluster.set_job("100", exit_code="75:0", time_limit="00:01:00")
    assert cluster.run_link(script, successor, predecessor="100").returncode == 0  # once: a
    first = json.loads(read(run_dir, rc.JOURNAL_FILE))  # warned checkpoint, as above
    assert (first["action"], first["retries"]) == ("resume", 0)
    cluster.finish(successor, "FAILED", 12)
    cluster.set_job(successor, exit_code="75:0", time_limit="00:01:00")
    result = cluster.run_link(script, first["successor"], predecessor=successor)
    record = json.loads(read(run_dir, rc.JOURNAL_FILE))
    assert (result.returncode, record["cause"], record["retries"]) == (1, "no_progress", 1), \
        result.stderr


def test_resume_of_a_live_chain_names_the_cancel_command_with_its_directory(
        cluster, run_dir, capsys, monkeypatch):
    # issue 40, trial on 24.11: "run python3 .../resumable_chain.py cancel first", pasted, said
    # "cancel: the following arguments are required: DIR"
    start_chain(cluster, run_dir)
    status, _, err = run_cli(cluster, capsys, monkeypatch, "resume", run_dir)
    assert status == 2 and "run %s cancel %s first" % (BY_PATH, rc.shell_quote(run_dir)) in err, err


@pytest.mark.parametrize("state, nodes, verdict", [
    ("CANCELLED by 0", "", "stopped: job 1000, the chain's first job, was CANCELLED by root "
     "(uid 0) before it ran (its guard leaves a person's cancel alone)"),
    ("NODE_FAIL", "node1", "broken: job 1000, the chain's first job, ended NODE_FAIL before its "
     "prologue recorded it (its guard could not replace it; if it started, its log says why)"),
], ids=["a person cancelled it", "its node failed"])  # a bad --python: said in its log alone
def test_a_first_job_that_ended_before_it_ran_is_stopped_only_by_a_persons_cancel(
        cluster, tmp_path, capsys, monkeypatch, state, nodes, verdict):
    # issue 40, trial on 24.11: the guard said "job 825 is CANCELLED: nothing to do", the verdict
    # "broken ... its guard could not replace it", and status --check failed for a person's cancel
    script = write(str(tmp_path / "train.sh"), "#!/bin/bash\n#SBATCH -t 5\ntrue\n")
    run_dir = str(tmp_path / "r")
    assert run_cli(cluster, capsys, monkeypatch, "submit", run_dir, script)[0] == 0
    cluster.set_job("1000", state=state, nodes=nodes, elapsed=0, end="2026-11-30T02:00:00")
    cluster.finish("900000", "COMPLETED", 5)  # its guard ran, and queued nothing
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--check")
    report = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    assert report["verdict"] == verdict and status == int(verdict.startswith("broken")), out
    assert report["next"].startswith("its first job never ran: cd "), report["next"]
