"""Fixtures: a fake Slurm cluster (tests/fake_cluster.py) and a run directory."""
import sys

import pytest

from fake_cluster import FakeCluster


def pytest_addoption(parser):
    parser.addoption("--histories", type=int, default=None,
                     help="random fault histories to run (test_random_histories; default 300, "
                          "or $RESUMABLE_CHAIN_HISTORIES)")
    parser.addoption("--history-seed", type=int, default=None,
                     help="seed of the first history (default fixed, or "
                          "$RESUMABLE_CHAIN_HISTORY_SEED); a failure prints the seed to replay")


@pytest.fixture
def cluster(tmp_path):
    return FakeCluster(str(tmp_path))


@pytest.fixture
def run_dir(tmp_path):
    return str(tmp_path / "run dir")



def pytest_terminal_summary(terminalreporter):
    """Print the job IDs and final states of every real-Slurm scenario that ran."""
    e2e = sys.modules.get("test_slurm_e2e")
    if not e2e or not e2e.REPORT:
        return
    terminalreporter.section("real Slurm chains (%s)" % e2e.RELEASE)
    for name, jobs in e2e.REPORT:
        terminalreporter.write_line("[%s] %s: %s" % (e2e.RELEASE, name, ", ".join(
            "%s %s (%d s)" % job for job in jobs)))


@pytest.fixture(scope="session")
def noflock(tmp_path_factory):
    """The LD_PRELOAD shim (tests/noflock.c) that makes lock calls fail with ENOSYS, built."""
    import os
    import shutil
    import subprocess
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        if os.environ.get("CI"):
            pytest.fail("no C compiler: .ci/run installs gcc to build tests/noflock.c")
        pytest.skip("no C compiler to build tests/noflock.c")
    shim = str(tmp_path_factory.mktemp("noflock") / "noflock.so")
    subprocess.run([compiler, "-shared", "-fPIC", "-o", shim,
                    os.path.join(os.path.dirname(__file__), "noflock.c"), "-ldl"], check=True)
    return shim
