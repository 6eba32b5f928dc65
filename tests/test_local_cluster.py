"""The real-cluster tests and the chaos run refuse any cluster but the project's local one
(tests/local_cluster.py): shown with a fake `scontrol` that prints a real `scontrol show config`
(recorded on 22.05) of another cluster, every other Slurm command failing."""
import os
import subprocess
import sys

import pytest

import local_cluster

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIG = os.path.join(HERE, "slurm_outputs", "22.05", "scontrol-show-config.txt")
FOREIGN = "cluster 'prod' is not the project's local test cluster (ci/local-slurm.sh)"
TABLE = {"local": "/etc/slurm/slurm.conf", "local2411": "/opt/slurm-24.11.7/etc/slurm.conf"}
MARKER = "# Written by ci/local-slurm.sh"


def recorded_config(cluster="local", conf="/etc/slurm/slurm.conf"):
    with open(CONFIG) as handle:
        lines = handle.read().split("# stderr")[0].splitlines()[2:]  # past "# $" and "# exit"
    return "\n".join(line.replace("= local", "= " + cluster).replace(
        "= /etc/slurm/slurm.conf", "= " + conf) for line in lines) + "\n"


@pytest.fixture
def other_cluster(tmp_path):
    """An environment whose scontrol reports cluster 'prod' and whose other Slurm commands
    fail: if the check let it through, nothing could reach a real cluster."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "config.txt").write_text(recorded_config("prod"))
    for command in ("sinfo", "sacct", "sbatch", "squeue", "scancel", "sacctmgr", "scontrol"):
        script = bin_dir / command
        script.write_text("#!/bin/sh\n%secho 'fake %s: not here' >&2; exit 1\n" % (
            'test "$*" = "show config" && exec cat %s\n' % (tmp_path / "config.txt")
            if command == "scontrol" else "", command))
        script.chmod(0o755)
    environ = dict(os.environ, PATH="%s%s%s" % (bin_dir, os.pathsep, os.environ["PATH"]))
    for name in ("SLURM_CONF", "RESUMABLE_CHAIN_REQUIRE_SLURM", "RESUMABLE_CHAIN_REQUIRE_RELEASE"):
        environ.pop(name, None)
    return environ


def test_a_cluster_with_another_name_is_refused(other_cluster):
    assert local_cluster.not_local_reason(other_cluster) == FOREIGN


@pytest.mark.parametrize("require,expected_status,expected", [
    ("", 0, FOREIGN + ": real-cluster tests skipped"),
    ("1", 2, "RuntimeError: RESUMABLE_CHAIN_REQUIRE_SLURM=1 but " + FOREIGN),
], ids=["skipped with the reason", "a failure when CI requires the cluster"])
def test_the_real_cluster_tests_refuse_a_cluster_with_another_name(
        other_cluster, require, expected_status, expected):
    other_cluster["RESUMABLE_CHAIN_REQUIRE_SLURM"] = require
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:randomly", "-p", "no:cacheprovider",
         "tests/test_slurm_e2e.py"], cwd=ROOT, env=other_cluster, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    assert result.returncode == expected_status and expected in result.stdout, result.stdout
    assert " passed" not in result.stdout and " failed" not in result.stdout


def test_the_chaos_run_refuses_a_cluster_with_another_name(other_cluster):
    result = subprocess.run([sys.executable, os.path.join(HERE, "chaos.py")], env=other_cluster,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, timeout=60)
    assert (result.returncode, result.stderr) == (2, "chaos: refused: %s\n" % FOREIGN)


def test_the_release_table_names_each_local_cluster_and_its_config():
    table = subprocess.run(["bash", local_cluster.LOCAL_SLURM, "table"], stdout=subprocess.PIPE,
                           universal_newlines=True, check=True).stdout
    clusters, marker = local_cluster.parse_table(table)
    assert clusters == {"local": "/etc/slurm/slurm.conf",
                        "local2411": "/opt/slurm-24.11.7/etc/slurm.conf",
                        "local2605": "/opt/slurm-26.05.3/etc/slurm.conf"}
    assert marker == MARKER


@pytest.mark.parametrize("cluster,conf,first_line,expected", [
    ("local2411", "/opt/slurm-24.11.7/etc/slurm.conf", MARKER + ": a single-node test cluster",
     None),
    ("prod", "/etc/slurm/slurm.conf", MARKER, FOREIGN),
    ("local", "/etc/slurm/prod.conf", MARKER,
     "cluster 'local' reads /etc/slurm/prod.conf, not /etc/slurm/slurm.conf that "
     "ci/local-slurm.sh writes"),
    ("local", "/etc/slurm/slurm.conf", "# site config", "cluster 'local': /etc/slurm/slurm.conf "
     "was not written by ci/local-slurm.sh (its first line: '# site config')"),
    ("local", "/etc/slurm/slurm.conf", None, "cluster 'local': /etc/slurm/slurm.conf was not "
     "written by ci/local-slurm.sh (its first line: None)"),
], ids=["the local one", "another name", "another config file", "a config without the marker",
        "an unreadable config"])
def test_only_the_cluster_the_script_made_is_local(cluster, conf, first_line, expected):
    config = local_cluster.parse_config(recorded_config(cluster, conf))
    assert local_cluster.foreign_reason(config, TABLE, MARKER, lambda path: first_line) == expected
