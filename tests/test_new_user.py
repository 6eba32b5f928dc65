"""What a new user tripped over (issue 30): one ``finished`` per chain, cancel of an ended chain,
a new chain's own events, pending reasons that never clear, job names and working directories,
every job of the chain in ``status``, and the words of the command line."""
import json
import os
import sys

import pytest

import resumable_chain as rc
from fake_cluster import read, run_cli, start_chain
from test_operations import failed_chain, write


@pytest.mark.parametrize("force", [False, True], ids=["submit", "submit --force"])
def test_a_new_chain_in_an_old_directory_starts_without_the_old_chains_events(
        cluster, run_dir, tmp_path, capsys, monkeypatch, force):
    failed_chain(cluster, run_dir)
    old = read(run_dir, rc.EVENTS_FILE)
    assert '"failed"' in old
    script = write(str(tmp_path / "s.sh"), "#!/bin/bash\ntrue\n")
    status, out, err = run_cli(cluster, capsys, monkeypatch, "submit", run_dir,
                               *(["--force"] if force else []) + [script])
    assert status == 0, err
    assert not os.path.exists(os.path.join(run_dir, rc.EVENTS_FILE))
    assert read(run_dir, rc.EVENTS_FILE + rc.PREVIOUS_SUFFIX) == old  # kept with the others
    report = json.loads(run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")[1])
    assert report["events"] == []
