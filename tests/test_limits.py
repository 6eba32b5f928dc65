"""Issue 43 items 2-3: sweeps and chains under the job limits and rate limits of large sites."""
import json
import os
import sys

import pytest

import resumable_chain as rc
from fake_cluster import read, run_cli

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
