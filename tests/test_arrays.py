"""Issue 31 part 1: sweeps, a chain per array task (docs/arrays.md)."""
import collections
import json
import os
import shlex
import sys

import pytest

import resumable_chain as rc
import fake_slurm
from fake_cluster import read, run_cli


def _sbatch_array_specs():
    path = os.path.join(os.path.dirname(__file__), "slurm_outputs", "26.05", "arrays",
                        "sbatch-array-specs.txt")
    with open(path) as handle:
        return [line.rstrip("\n").split("|", 2) for line in handle if not line.startswith("#")]


@pytest.mark.parametrize("spec, status, said", _sbatch_array_specs())
def test_an_array_is_refused_exactly_when_real_sbatch_refuses_it(spec, status, said):
    if status == "0":
        rc.parse_array(spec, 1001)
    else:
        with pytest.raises(ValueError, match="MaxArraySize 1001|not a count"):
            rc.parse_array(spec, 1001)


@pytest.mark.parametrize("spec, expected", [
    ("0-4", ([0, 1, 2, 3, 4], None)),
    ("1,3,5-9:2", ([1, 3, 5, 7, 9], None)),
    ("0-99%10", (list(range(100)), 10)),
    ("[0-3]%2", ([0, 1, 2, 3], 2)),
    ("0-3,2", ([0, 1, 2, 3], None)),  # overlapping: one task each
    ("0-3%0", ([0, 1, 2, 3], None)),  # %0: no throttle (slurmctld keeps only N > 0)
    ("1-5%2%3", ([1, 2, 3, 4, 5], 2)),  # the first % counts
    ("", None),  # no array
])
def test_an_array_names_its_tasks_and_throttle(spec, expected):
    assert rc.parse_array(spec, 1001) == expected


SWEEP_SCRIPT = ("#!/bin/bash\n#SBATCH -c 1\n%s"
                'echo "$SLURM_JOB_ID $SLURM_ARRAY_TASK_ID $RESUMABLE_CHAIN_DIR" >> "$WORKLOG"\n')


def submit_sweep(cluster, tmp_path, capsys, monkeypatch, *options, directive=""):
    script = tmp_path / "train.sbatch"
    script.write_text(SWEEP_SCRIPT % directive)
    sweep = str(tmp_path / "sweep")
    return sweep, run_cli(cluster, capsys, monkeypatch, "submit", sweep, "--python",
                          sys.executable, *(list(options) + [str(script)]))


@pytest.mark.parametrize("options, directive", [
    (["--array=0,2,5"], ""),
    (["-a", "0,2,5"], ""),
    ([], "#SBATCH --array=0-5:5,2\n"),
    (["--array=0,2,5%0"], ""),  # %0: no throttle
    (["--array=0,2,5"], "#SBATCH --array=0-99\n"),  # the command line wins, as in sbatch
], ids=["--array", "-a", "#SBATCH --array", "%0", "option over #SBATCH"])
def test_submit_starts_one_chain_per_task_in_its_own_directory(
        cluster, tmp_path, capsys, monkeypatch, options, directive):
    sweep, (status, out, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, *options,
                                             directive=directive)
    assert status == 0, err
    assert out.split() == ["1000", "1001", "1002"]
    for task, job in zip((0, 2, 5), ("1000", "1001", "1002")):
        submitted = json.loads(read(os.path.join(sweep, str(task)), rc.SUBMIT_FILE))
        assert submitted["first_job"] == job and cluster.job(job)["array"] == str(task)
        assert "--array=%d" % task in submitted["sbatch_args"]  # the guard's replacement too
        assert "--job-name=%d_sweep" % task in cluster.job(job)["options"]  # squeue: the task
    assert sorted(cluster.guards()) == ["1000", "1001", "1002"]  # each first job is guarded
    assert sorted(os.listdir(sweep)) == ["0", "2", "5"]


@pytest.mark.parametrize("options", [[], ["-J", "ablation"]], ids=["named after the sweep", "-J"])
def test_squeue_tells_a_sweeps_tasks_apart_by_their_jobs_names(cluster, tmp_path, capsys,
                                                               monkeypatch, options):
    """Every link and guard of a sweep was named alike: squeue (8 characters of a name) could not
    say which task a job is. Task i's links are named i_<name>, its guards g:i_<name>."""
    sweep, (_, out, _) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=0,1,10",
                                      *options)
    for task, first in zip((0, 1, 10), out.split()):
        copy = os.path.join(sweep, str(task), "resumable-train.sbatch")
        assert cluster.run_link(copy, first, SLURM_JOB_NAME=cluster.job(first)["name"],
                                SLURM_JOB_PARTITION="debug").returncode == 0
    shown = sorted(job["name"][:8] for job in cluster.load()["jobs"].values())
    name = (options or ["", "sweep"])[1]
    assert shown == sorted(("%s%d_%s" % (guard, task, name))[:8] for task in (0, 1, 10)
                           for guard in ("", "g:") for _ in range(2))  # first job, successor


@pytest.mark.parametrize("options, directive, message", [
    (["--array=0-9%2"], "", "the throttle %2 would not hold"),
    ([], "#SBATCH --array=1-4%1\n", "the throttle %1 would not hold"),
    (["--array=0-1001"], "", "below MaxArraySize 1001"),
    (["--array=1-x"], "", "is not an index sbatch takes"),
    (["--array=5-1"], "", "is not an index sbatch takes"),
], ids=["throttle", "throttle in script", "too large", "bad syntax", "backwards"])
def test_a_sweep_sbatch_would_refuse_or_whose_throttle_would_not_hold_is_refused_first(
        cluster, tmp_path, capsys, monkeypatch, options, directive, message):
    sweep, (status, out, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, *options,
                                             directive=directive)
    assert status == 2 and message in err and err.count("\n") == 1, err
    assert cluster.calls("sbatch") == [] and not os.path.exists(sweep)


def test_max_array_size_is_asked_only_for_a_sweep(cluster, tmp_path, capsys, monkeypatch):
    cluster.update(max_array_size=4)
    sweep, (status, _, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=4")
    assert status == 2 and "below MaxArraySize 4" in err
    script = tmp_path / "plain.sbatch"
    script.write_text("#!/bin/bash\ntrue\n")
    assert run_cli(cluster, capsys, monkeypatch, "submit", str(tmp_path / "r"), str(script))[0] == 0
    assert [call["argv"] for call in cluster.calls("scontrol")][-2:] == [
        ["show", "config"], ["release", "1000"]]  # the cluster's name only, as before


@pytest.mark.parametrize("array", ["--array=0", "--array=0-6"], ids=["1 task", "7 tasks"])
def test_a_sweep_asks_the_clusters_configuration_as_often_for_7_tasks_as_for_1(
        cluster, tmp_path, capsys, monkeypatch, array):
    """MaxArraySize, then the cluster's name once: not once per task."""
    sweep, (status, _, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, array)
    assert status == 0, err
    assert [call["argv"] for call in cluster.calls("scontrol")].count(["show", "config"]) == 2


def run_task_link(cluster, sweep, task, job, predecessor=None):
    copy = os.path.join(sweep, str(task), "resumable-train.sbatch")
    result = cluster.run_link(copy, job, predecessor=predecessor)
    assert result.returncode == 0, result.stderr
    return cluster.pending()[-1]


@pytest.mark.parametrize("failed_task", [0, 2], ids=["task 0 fails", "task 2 fails"])
def test_each_task_continues_and_counts_its_retries_alone(cluster, tmp_path, capsys, monkeypatch,
                                                          failed_task):
    sweep, (status, out, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "-a", "0,2")
    firsts = dict(zip((0, 2), out.split()))
    for task, first in firsts.items():
        successor = run_task_link(cluster, sweep, task, first)
        # the successor is the same task, after this link's own (raw) job ID; its guard as ever
        assert cluster.job(successor)["array"] == str(task)
        assert "--dependency=afternotok:%s" % first in cluster.job(successor)["options"]
        cluster.finish(first, "FAILED" if task == failed_task else "TIMEOUT", 60)
        run_task_link(cluster, sweep, task, successor, predecessor=first)
        assert cluster.guards()[cluster.pending()[-1]]
    with open(cluster.worklog) as handle:
        work = [line.split() for line in handle]
    assert [(task, directory) for _, task, directory in work] == [
        (str(task), os.path.join(sweep, str(task))) for task in (0, 0, 2, 2)]
    statuses = [json.loads(read(os.path.join(sweep, str(task)), rc.JOURNAL_FILE))
                for task in (0, 2)]
    retries = [rc.StateStore(os.path.join(sweep, str(task))).read_counter(rc.RETRIES_FILE) or 0
               for task in (0, 2)]
    assert retries == [int(failed_task == 0), int(failed_task == 2)]
    assert [record["next"]["sbatch_args"][-1] for record in statuses] == ["--array=0", "--array=2"]


def test_status_of_a_sweep_shows_every_task_and_names_it(cluster, tmp_path, capsys, monkeypatch):
    sweep, (_, out, _) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=0,2,10")
    firsts = out.split()
    run_task_link(cluster, sweep, 2, firsts[1])  # task 2 runs; tasks 0 and 10 wait
    status, out, err = run_cli(cluster, capsys, monkeypatch, "status", sweep, "--json")
    assert status == 0, err
    rows = json.loads(out)
    assert [(row["task"], row["verdict_word"]) for row in rows] == [
        (0, "waiting"), (2, "running"), (10, "waiting")]  # by task, not by name: 2 before 10
    status, out, err = run_cli(cluster, capsys, monkeypatch, "status", sweep, "--check")
    assert status == 0 and "3 chain(s)" in out, out + err


@pytest.mark.parametrize("running", [False, True], ids=["task pending", "task running"])
def test_cancel_of_one_task_leaves_the_others(cluster, tmp_path, capsys, monkeypatch, running):
    sweep, (_, out, _) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=0-1")
    firsts = out.split()
    successor = running and run_task_link(cluster, sweep, 1, firsts[1])
    status, out, err = run_cli(cluster, capsys, monkeypatch, "cancel", os.path.join(sweep, "1"))
    assert status == 0, err
    cancelled = set(word for call in cluster.calls("scancel") for word in call["argv"])
    assert firsts[1] in cancelled and firsts[0] not in cancelled
    assert (successor in cancelled) if running else True
    assert cluster.pending() == [firsts[0]]


def _cancel_a_sweep(cluster, tmp_path, capsys, monkeypatch, tasks, situation, options):
    """Submit a sweep of ``tasks`` left in ``situation``, cancel all its tasks: (exit status,
    lines, {Slurm command: how many times cancel ran it})."""
    os.makedirs(str(tmp_path))
    sweep, (_, out, _) = submit_sweep(cluster, tmp_path, capsys, monkeypatch,
                                      "--array=0-%d" % (tasks - 1))
    for task, first in enumerate(out.split()):
        if situation != "waiting":
            successor = run_task_link(cluster, sweep, task, first)
        if situation == "finished":
            cluster.finish(first, "COMPLETED", 5)
            cluster.set_job(successor, state="CANCELLED", start="None")
    cluster.update(scancel_ignored=situation == "will not die")
    before = len(cluster.calls(guards=True))
    status, out, _ = run_cli(cluster, capsys, monkeypatch, "cancel", *(
        [os.path.join(sweep, str(task)) for task in range(tasks)] + options))
    return status, out.splitlines(), collections.Counter(
        call["command"] for call in cluster.calls(guards=True)[before:])


@pytest.mark.parametrize("situation, options, said", [
    ("waiting", [], "cancelled: "),
    ("running", [], "cancelled: "),
    ("running", ["--dry-run"], "would cancel: "),
    ("finished", [], "already finished"),
    ("will not die", [], "cancelled: "),  # exit 1: "still pending or running"
], ids=["held tasks", "running tasks", "--dry-run", "finished tasks", "jobs that will not die"])
def test_cancel_of_a_sweeps_tasks_runs_as_many_slurm_commands_for_2_tasks_as_for_7(
        cluster, tmp_path, capsys, monkeypatch, situation, options, said):
    """cancel runs/* of a 200-task sweep took 226 s: a few commands per task, one task after
    another. The commands are for all tasks at once: as many for 7 tasks as for 2."""
    few, many = (_cancel_a_sweep(cluster, tmp_path / name, capsys, monkeypatch, tasks,
                                 situation, options) for name, tasks in (("few", 2), ("many", 7)))
    rounds = rc.CANCEL_ROUNDS if situation == "will not die" else 1  # pending, then running
    assert few[2] == many[2] and few[2]["scancel"] <= 2 * rounds, (few[2], many[2])
    for status, lines, _ in (few, many):
        assert all(": " + said in line for line in lines), lines
        assert [status, "still pending" in lines[-1]] == [int(situation == "will not die")] * 2
    if said == "cancelled: " and situation != "will not die":
        assert cluster.pending() == [] and cluster.guards() == {}


@pytest.mark.parametrize("command", ["cancel", "resume"])
def test_cancel_or_resume_of_the_sweeps_directory_names_its_tasks_chains(
        cluster, tmp_path, capsys, monkeypatch, command):
    """submit runs/sweep --array=... then cancel runs/sweep: each chain is acted on by name, and
    the refusal says how (it said only that runs/sweep has no .gym_job_chain)."""
    sweep, _ = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=0-1")
    before = len(cluster.calls("scancel")) + len(cluster.calls("sbatch"))
    status, out, err = run_cli(cluster, capsys, monkeypatch, command, sweep)
    assert status == 2 and err.count("\n") == 1, err
    assert "2 chain(s) are below it" in err and "e.g. %s/*" % sweep in err, err
    assert len(cluster.calls("scancel")) + len(cluster.calls("sbatch")) == before
    status, out, err = run_cli(cluster, capsys, monkeypatch, command, str(tmp_path))
    assert status == 2 and "2 chain(s) are below it" in err, err
    assert "e.g. %s/*/*" % tmp_path in err, err  # the tasks, two levels down
    os.makedirs(str(tmp_path / "solo"))  # a chain one level down too: no one glob fits
    with open(str(tmp_path / "solo" / rc.CHAIN_FILE), "w") as handle:
        handle.write("77\n")
    status, out, err = run_cli(cluster, capsys, monkeypatch, command, str(tmp_path))
    assert "3 chain(s)" in err and "e.g. {0}/solo {0}/sweep/0 {0}/sweep/1".format(tmp_path) in err


def test_a_tasks_first_job_that_died_before_its_prologue_is_replaced_as_the_same_task(
        cluster, tmp_path, capsys, monkeypatch):
    sweep, (_, out, _) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=3")
    first = out.strip()
    cluster.set_job(first, state="NODE_FAIL", start="2026-11-30T01:01:00",
                    end="2026-11-30T01:01:00")
    event, _, words = rc.guard_chain(os.path.join(sweep, "3"), first, dict(os.environ),
                                     sleep=lambda seconds: None)
    [new] = cluster.pending()
    assert event.event == "healed" and cluster.job(new)["array"] == "3", words
    run_task_link(cluster, sweep, 3, new)
    assert read(os.path.join(sweep, "3"), rc.CHAIN_FILE) == new + "\n"


@pytest.mark.parametrize("array_job, task, after", [
    ("99", "4", "100"), ("100", "4", "100_4"), (None, None, None)],
    ids=["array task", "the task keeping the array's ID", "not an array task"])
def test_a_rendered_run_directory_names_the_task_with_percent_a(cluster, tmp_path, array_job,
                                                               task, after):
    sweep = str(tmp_path / "sweep")
    script = cluster.write_script(os.path.join(sweep, "%a"))
    assert os.path.isdir(sweep) and not os.path.exists(os.path.join(sweep, "%a"))
    extra = {"SLURM_ARRAY_TASK_ID": task, "SLURM_ARRAY_JOB_ID": array_job,
             "SLURM_ARRAY_TASK_COUNT": "5"} if task else {}
    result = cluster.run_link(script, 100, **extra)
    if task is None:
        assert result.returncode == 2 and "names an array task (%a)" in result.stderr
        assert result.stderr.count("\n") == 1 and cluster.pending() == []
        return
    assert result.returncode == 0, result.stderr
    assert read(os.path.join(sweep, "4"), rc.CHAIN_FILE) == "100\n"
    [successor] = cluster.pending()
    assert cluster.job(successor)["array"] == "4"
    assert "--dependency=afternotok:" + after in cluster.job(successor)["options"]
    cluster.finish(100, "TIMEOUT", 60)  # the successor knows its predecessor either way
    result = cluster.run_link(script, successor, predecessor=after, SLURM_ARRAY_TASK_ID="4")
    assert result.returncode == 0, result.stderr
    assert read(os.path.join(sweep, "4"), rc.CHAIN_FILE) == "100\n%s\n" % successor


def _recorded(release, name):
    with open(os.path.join(os.path.dirname(__file__), "slurm_outputs", release, "arrays",
                           name + ".txt")) as handle:
        return handle.read().split("# stderr")[0]


@pytest.mark.parametrize("release, name, expected", [
    ("26.05", "sacct-one-task-array-ended", {"2636": "CANCELLED by 0", "2638": "COMPLETED"}),
    ("22.05", "sacct-one-task-array-links", {"4285": "CANCELLED by 0", "4287": "RUNNING"}),
    ("26.05", "sacct-array-tasks", {}),  # JobID 14_0 without JobIDRaw: not a job ID asked
], ids=["26.05", "22.05", "no JobIDRaw"])
def test_sacct_finds_an_array_task_by_its_raw_id(release, name, expected):
    found = rc.parse_sacct(_recorded(release, name))
    assert {job_id: jobs[-1].state for job_id, jobs in found.items()} == expected


@pytest.mark.parametrize("release, name, expected", [
    ("26.05", "squeue-one-task-array-successor", {"2638": "2636", "2636": None}),
    ("22.05", "squeue-one-task-array-successor", {"4287": "4285", "4285": None}),
])
def test_squeue_shows_a_one_task_arrays_successor_by_its_raw_id(release, name, expected):
    jobs = rc.parse_squeue(_recorded(release, name))
    assert {job.job_id: job.predecessor for job in jobs} == expected


@pytest.mark.parametrize("release, guard, job", [("26.05", "2637", "2636"),
                                                 ("22.05", "4286", "4285")])
def test_the_guard_of_a_one_task_array_is_found(release, guard, job):
    assert rc.parse_guard(_recorded(release, "squeue-guard-of-one-task-array"), job) == guard


@pytest.mark.parametrize("name, columns", [
    ("sacct-one-task-array-running", [0, 8]),  # JobID 2636_3 or 2638_[3], JobIDRaw
    ("squeue-one-task-array-held", [0, 6]),  # %A, the reason
    ("squeue-one-task-array-successor", [0, 5]),  # %A, %E: afternotok:2636_*(unfulfilled)
    ("squeue-guard-of-one-task-array", [0, 1]),  # %i, %E: afterany:2636_*(unfulfilled)
])
def test_the_fake_names_a_one_task_array_as_real_slurm_does(name, columns):
    # 26.05: task 3's first job 2636 (held, then running), its successor 2638, 2636's guard 2637
    command, real = _recorded("26.05", name).split("\n", 2)[0::2]
    argv = shlex.split(command[len("# $ "):])
    held = "held" in name
    cluster = {"jobs": {
        "2636": {"state": "PENDING" if held else "RUNNING", "array": "3", "held": held},
        "2637": {"state": "PENDING", "wrap": "true", "dependency": "afterany:2636"},
        "2638": {"state": "PENDING", "array": "3", "dependency": "afternotok:2636"}}}
    fake = fake_slurm.respond(argv[0], argv[1:], cluster, 0)[1]
    assert sorted([line.split("|")[column] for column in columns] for line in fake.splitlines()) == \
        sorted([line.split("|")[column] for column in columns] for line in real.splitlines())


@pytest.mark.parametrize("environ, expected", [
    ({}, "2640"),  # not an array task
    ({"SLURM_ARRAY_JOB_ID": "2639", "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "3"},
     "2640"),  # a task with its own ID
    ({"SLURM_ARRAY_JOB_ID": "2640", "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3"},
     "2640_2"),  # the task that kept the array's ID: 2640 alone would be every task
    ({"SLURM_ARRAY_JOB_ID": "2640", "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "1"},
     "2640"),  # a one-task array (submit's tasks, every later link)
], ids=["plain job", "array task", "task keeping the array's ID", "one-task array"])
def test_a_successor_waits_for_its_own_task_only(environ, expected):
    assert rc.array_task_id("2640", environ) == expected


@pytest.mark.parametrize("dependency, expected", [
    ("afternotok:2639_*(unfulfilled)", "2639"),  # squeue: after a (one-task) array's ID
    ("afternotok:2639_2", "2639"),  # after the task that kept the array's ID (array_task_id)
    ("afternotok:2640(unfulfilled)", "2640"),
])
def test_a_dependency_on_an_array_task_names_its_job(dependency, expected):
    assert rc.parse_dependency(dependency) == expected


def test_scontrol_of_an_arrays_id_describes_the_task_that_kept_it():
    # 26.05: scontrol show job 2639 prints task 2 (JobId=2639), then tasks 1 and 0 (2641, 2640)
    job = rc.parse_scontrol(_recorded("26.05", "scontrol-array-by-its-job-id").split("\n", 2)[2])
    assert (job.job_id, job.state) == ("2639", "RUNNING")


def test_resume_of_a_rendered_sweeps_task_runs_where_its_prologue_keeps_the_task(
        cluster, tmp_path, capsys, monkeypatch):
    """The prologue names sweep/%a: resume of sweep/4 is no moved run directory."""
    sweep = str(tmp_path / "sweep")
    script = cluster.write_script(os.path.join(sweep, "%a"))
    assert cluster.run_link(script, 100, SLURM_ARRAY_TASK_ID="4", SLURM_ARRAY_JOB_ID="99",
                            SLURM_ARRAY_TASK_COUNT="5").returncode == 0
    [successor] = cluster.pending()
    cluster.finish(100, "TIMEOUT", 60)
    cluster.set_job(successor, state="CANCELLED by 0")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "resume", os.path.join(sweep, "4"))
    assert status == 0, err
    assert cluster.job(cluster.pending()[-1])["array"] == "4"


def test_resume_of_a_cancelled_task_queues_the_same_task(cluster, tmp_path, capsys, monkeypatch):
    sweep, (_, out, _) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=0-1")
    first = out.split()[1]
    successor = run_task_link(cluster, sweep, 1, first)
    task = os.path.join(sweep, "1")
    assert run_cli(cluster, capsys, monkeypatch, "cancel", task)[0] == 0
    cluster.finish(first, "CANCELLED by 0", 30)
    cluster.set_job(successor, state="CANCELLED by 0")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "resume", task)
    assert status == 0, err
    resumed = cluster.pending()[-1]  # the newest: task 0's first job waits too
    assert cluster.job(resumed)["array"] == "1" and resumed in out + err
    run_task_link(cluster, sweep, 1, resumed)
    assert read(task, rc.CHAIN_FILE).split() == [first, resumed]


def test_a_sweep_over_a_live_task_is_refused_before_anything_is_queued(cluster, tmp_path, capsys,
                                                                       monkeypatch):
    sweep, (status, out, _) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=2")
    calls = len(cluster.calls("sbatch", guards=True))
    _, (status, out, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=0-3")
    assert status == 2 and "is live" in err and err.count("\n") == 1, err
    assert len(cluster.calls("sbatch", guards=True)) == calls and os.listdir(sweep) == ["2"]


def test_a_sweep_whose_log_directory_is_missing_is_refused_before_anything_is_queued(
        cluster, tmp_path, capsys, monkeypatch):
    # Found by review: with -o logs/%a.out the check ran per task, so task 0 (whose logs/ was
    # there) was queued and task 1 refused: a half-submitted sweep.
    os.makedirs(str(tmp_path / "sweep" / "0" / "logs"))
    sweep, (status, out, err) = submit_sweep(cluster, tmp_path, capsys, monkeypatch,
                                             "--array=0-2", "-o", "logs/%a.out")
    assert status == 2 and "does not exist" in err and err.count("\n") == 1, err
    assert cluster.calls("sbatch", guards=True) == []


@pytest.mark.parametrize("failing, words", [
    (1, "task 0: sbatch: error: Batch job submission failed: Invalid partition name specified; "
        "nothing is queued: submit the rest with --array=0,2,5"),
    (2, "task 2: sbatch: error: Batch job submission failed: Invalid partition name specified; "
        "task 0 is queued: submit the rest with --array=2,5"),
], ids=["the first task's sbatch fails", "a later task's sbatch fails"])
def test_a_sweep_whose_sbatch_fails_says_which_tasks_were_submitted(
        cluster, tmp_path, capsys, monkeypatch, failing, words):
    # issue 40, trial on 24.11: a refused task 0 said "the tasks before it are submitted";
    # issue 43: which tasks are queued, and the --array= that submits the rest
    cluster.update(sbatch_link_error="Batch job submission failed: Invalid partition name "
                   "specified", sbatch_link_error_from=1000 + failing - 1)  # task 2's: job 1001
    status, _, err = submit_sweep(cluster, tmp_path, capsys, monkeypatch, "--array=0,2,5")[1]
    assert status != 0 and words in err, err


def test_a_sweep_tasks_first_job_that_never_ran_is_submitted_again_by_its_sweep():
    # New-user trial: status' next line named the task's directory, where submit refused it
    # ("run directory runs/o8/0/0 is inside the chain in runs/o8/0").
    submitted = {"original": "/x/ok.sbatch", "max_retries": 3, "sbatch_args": [
        "--job-name=0_o8", "--chdir=/r/runs/o8/0", "-p", "debug", "--array=0"]}
    words = rc._submit_again(submitted, "/r/runs/o8/0").split()
    assert words[words.index("submit") + 1] == "/r/runs/o8"
    assert "--job-name=o8" in words and "--array=0" in words and "--chdir=/r/runs/o8/0" in words
