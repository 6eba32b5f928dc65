"""status, cancel and submit against the fake Slurm commands, with the calls they make checked."""
import json
import os
import stat
import sys

import pytest

import resumable_chain as rc
from test_prologue import read, start_chain


def run_cli(cluster, capsys, monkeypatch, *argv):
    for name, value in cluster.env().items():
        monkeypatch.setenv(name, value)
    status = rc.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def running_chain(cluster, run_dir):
    """Link 100 timed out, link 1000 runs, successor 1001 is pending."""
    script, successor = start_chain(cluster, run_dir)
    cluster.finish(100, "TIMEOUT", 73)
    assert cluster.run_link(script, successor, predecessor=100).returncode == 0
    cluster.set_job(successor, state="RUNNING", elapsed=30)
    return script


def test_status_shows_every_link_with_one_sacct_call(cluster, run_dir, running_chain, capsys,
                                                     monkeypatch):
    before = len(cluster.calls("sacct"))
    status, out, err = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")
    assert status == 0, err
    report = json.loads(out)
    assert [(row["job"], row["state"]) for row in report["jobs"]] == [
        ("100", "TIMEOUT"), ("1000", "RUNNING"), ("1001", "PENDING")]
    assert report["walltime"] == 73 and report["retries"] == 0 and report["max_retries"] == 3
    assert report["pending_successor"] == "1001"
    assert report["verdict"] == "running: job 1000 is RUNNING"
    [sacct] = cluster.calls("sacct")[before:]
    assert sacct["argv"][:2] == ["-j", "100,1000,1001"]
    status, out, err = run_cli(cluster, capsys, monkeypatch, "status", run_dir)
    assert "verdict: running: job 1000 is RUNNING" in out and "1001" in out


def test_status_of_jobs_slurm_forgot(cluster, run_dir, running_chain, capsys, monkeypatch):
    cluster.update(jobs={})
    status, out, err = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")
    assert status == 0, err
    report = json.loads(out)
    assert {row["state"] for row in report["jobs"]} == {"UNKNOWN"}
    assert report["verdict"].startswith("unknown:")


def test_status_of_a_directory_that_is_not_a_chain(cluster, tmp_path, capsys, monkeypatch):
    status, out, err = run_cli(cluster, capsys, monkeypatch, "status", str(tmp_path))
    assert status == 2 and "is not a chain" in err and out == ""


@pytest.mark.parametrize("final,verdict", [
    ("complete", "finished"), ("stop", "stopped"), ("fail", "failed")])
def test_status_verdict_of_an_ended_chain(cluster, run_dir, capsys, monkeypatch, final, verdict):
    script, successor = start_chain(cluster, run_dir, max_retries=0)
    cluster.finish(100, {"complete": "COMPLETED", "stop": "CANCELLED by 0", "fail": "FAILED"}[final], 5)
    cluster.run_link(script, successor, predecessor=100)
    cluster.finish(successor, "COMPLETED" if final != "fail" else "FAILED", 0)
    status, out, err = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")
    assert json.loads(out)["verdict"].startswith(verdict + ":")


def test_cancel_pending_successor_first_then_running_link(cluster, run_dir, running_chain, capsys,
                                                          monkeypatch):
    status, out, err = run_cli(cluster, capsys, monkeypatch, "cancel", run_dir)
    assert status == 0, err
    assert out.splitlines()[0] == "cancelled: 1001 1000"
    cancels = [call["argv"] for call in cluster.calls("scancel")]
    assert cancels == [["1001"], ["1000"]]
    assert cluster.pending() == [] and cluster.job(1000)["state"].startswith("CANCELLED")
    again = run_cli(cluster, capsys, monkeypatch, "cancel", run_dir)
    assert again[0] == 0 and again[1].startswith("cancelled: nothing")


def test_a_link_that_starts_after_cancel_stops_without_work(cluster, run_dir, running_chain, capsys,
                                                            monkeypatch):
    cluster.update(scancel_ignored=True)  # the successor slips through, as in a race
    status, out, err = run_cli(cluster, capsys, monkeypatch, "cancel", run_dir)
    assert status == 1 and "still pending or running: 1000 1001" in out
    cluster.finish(1000, "TIMEOUT", 60)
    result = cluster.run_link(running_chain, 1001, predecessor=1000)
    assert result.returncode == 0
    assert "stop | predecessor 1000 CANCELLED (resumable-chain cancel)" in result.stderr
    assert "1001" not in cluster.work_done()
    assert len(cluster.calls("sbatch")) == 2


def test_cancel_dry_run_changes_nothing(cluster, run_dir, running_chain, capsys, monkeypatch):
    status, out, err = run_cli(cluster, capsys, monkeypatch, "cancel", run_dir, "--dry-run")
    assert status == 0 and out == "would cancel: 1000 1001\n"
    assert cluster.calls("scancel") == [] and cluster.pending() == ["1001"]
    assert not os.path.exists(os.path.join(run_dir, rc.CANCEL_FILE))


BATCH_SCRIPT = "#!/bin/bash\n#SBATCH --job-name=train\n\n# setup\n#SBATCH -c 2\necho train \"$@\"\n"


def write(path, text, mode=0o644):
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path


def test_submit_writes_a_resumable_copy_and_submits_it(cluster, tmp_path, capsys, monkeypatch):
    script = write(str(tmp_path / "train.sbatch"), BATCH_SCRIPT)
    run_dir = str(tmp_path / "runs" / "a")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "-p", "gpu",
                               "--time=4:00:00", "--max-walltime", "10:00:00", "--",
                               script, "--lr", "3e-4")
    assert status == 0, err
    assert out == "1000\n"
    copy = os.path.join(run_dir, "resumable-train.sbatch")
    [call] = cluster.calls("sbatch")
    log = "--output=" + os.path.join(run_dir, "slurm-%j.out")
    assert call["argv"] == ["--parsable", "--no-requeue", log, "-p", "gpu", "--time=4:00:00",
                            copy, "--lr", "3e-4"]
    with open(copy) as handle:
        text = handle.read()
    header, prologue = text.split("# >>> resumable_chain")
    assert header == "#!/bin/bash\n#SBATCH --job-name=train\n\n# setup\n#SBATCH -c 2\n"
    assert text.endswith('echo train "$@"\n')
    assert "--sbatch-arg=-p --sbatch-arg=gpu --sbatch-arg=--time=4:00:00" in prologue
    assert "--script=" + copy in prologue and "--max-walltime=10:00:00" in prologue
    assert os.stat(copy).st_mode & stat.S_IXUSR
    record = json.loads(read(run_dir, rc.SUBMIT_FILE))
    assert record["first_job"] == "1000" and record["max_walltime"] == 36000
    report = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")
    assert json.loads(report[1])["verdict"] == "waiting: job 1000 is pending"


def test_submitted_copy_runs_as_a_chain(cluster, tmp_path, capsys, monkeypatch):
    script = write(str(tmp_path / "train.sbatch"), BATCH_SCRIPT + 'echo "$SLURM_JOB_ID" >> "$WORKLOG"\n')
    run_dir = str(tmp_path / "run")
    assert run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "--python", sys.executable,
                   script)[0] == 0
    copy = os.path.join(run_dir, "resumable-train.sbatch")
    assert cluster.run_link(copy, 1000).returncode == 0
    cluster.finish(1000, "TIMEOUT", 60)
    assert cluster.run_link(copy, 1001, predecessor=1000).returncode == 0
    assert cluster.work_done() == ["1000", "1001"]
    assert cluster.calls("sbatch")[-1]["argv"][-1] == copy


def test_submit_keeps_the_scripts_own_output(cluster, tmp_path, capsys, monkeypatch):
    script = write(str(tmp_path / "t.sh"), "#!/bin/bash\n#SBATCH --output=mine-%j.log\ntrue\n")
    assert run_cli(cluster, capsys, monkeypatch, "submit", str(tmp_path / "r"), script)[0] == 0
    assert not any(a.startswith("--output") for a in cluster.calls("sbatch")[0]["argv"])


@pytest.mark.parametrize("text,options,message", [
    ("echo no shebang\n", [], "not a batch script"),
    ("#!/bin/bash\n#SBATCH --array=1-4\ntrue\n", [], "array"),
    ("#!/bin/bash\ntrue\n", ["--array=1-3"], "array"),
    ("#!/bin/bash\ntrue\n", ["-d", "afterok:5"], "dependency"),
], ids=["no shebang", "array in script", "array option", "dependency option"])
def test_submit_refuses(cluster, tmp_path, capsys, monkeypatch, text, options, message):
    script = write(str(tmp_path / "s.sh"), text)
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", str(tmp_path / "r"),
                               *(options + ["--", script]))
    assert status == 2 and message in err and err.count("\n") == 1
    assert cluster.calls("sbatch") == []


def test_submit_refuses_a_live_chain_unless_forced(cluster, run_dir, running_chain, tmp_path,
                                                   capsys, monkeypatch):
    script = write(str(tmp_path / "s.sh"), "#!/bin/bash\ntrue\n")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, script)
    assert status == 2 and "live chain (jobs 1000 1001)" in err
    assert len(cluster.calls("sbatch")) == 2
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir, "--force", script)
    assert status == 0, err
    assert read(run_dir, rc.CHAIN_FILE + ".prev") == "100\n1000\n"
    assert not os.path.exists(os.path.join(run_dir, rc.CHAIN_FILE))


PARSED_SUBMITS = [
    ("dashes", ["runs/a", "-p", "gpu", "--time=4:00:00", "--", "train.sbatch", "--lr", "3e-4"],
     ("runs/a", ["-p", "gpu", "--time=4:00:00"], "train.sbatch", ["--lr", "3e-4"], 3, None, False)),
    ("no dashes", ["runs/a", "--time=1", "--max-retries", "5", "t.sh", "x"],
     ("runs/a", ["--time=1"], "t.sh", ["x"], 5, None, False)),
    ("own options with =", ["d", "--max-walltime=1:00:00", "--force", "--python=/py", "t.sh"],
     ("d", [], "t.sh", [], 3, 3600, True)),
    ("script args look like options", ["d", "--", "t.sh", "--force", "--", "-x"],
     ("d", [], "t.sh", ["--force", "--", "-x"], 3, None, False)),
]


@pytest.mark.parametrize("argv,expected", [r[1:] for r in PARSED_SUBMITS],
                         ids=[r[0] for r in PARSED_SUBMITS])
def test_parse_submit(argv, expected):
    run_dir, own, sbatch_options, script, script_args = rc.parse_submit(argv)
    assert (run_dir, sbatch_options, script, script_args, own["max_retries"],
            own["max_walltime"], own["force"]) == expected


@pytest.mark.parametrize("argv", [[], ["d"], ["-p", "gpu", "--", "t.sh"], ["d", "--max-retries"],
                                  ["d", "--max-retries", "x", "t.sh"]])
def test_parse_submit_rejects(argv):
    with pytest.raises(rc.StateError):
        rc.parse_submit(argv)
