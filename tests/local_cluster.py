"""Whether the Slurm cluster the commands on PATH reach is the project's own local test cluster.

The real-cluster tests (tests/test_slurm_e2e.py) and the chaos run (tests/chaos.py) down the
node, stop slurmdbd, preempt jobs and restart slurmctld: they run only on a cluster that
ci/local-slurm.sh made, never on one that merely answers. Proof: `scontrol show config` names a
cluster of the script's release table, reads the slurm.conf the script writes for it, and that
file begins with the script's marker line.
"""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCAL_SLURM = os.path.join(ROOT, "ci", "local-slurm.sh")


def parse_config(text):
    """{name: value} of `scontrol show config` ("Name = Value" lines)."""
    pairs = (line.partition("=") for line in text.splitlines() if " = " in line)
    return {name.strip(): value.strip() for name, _, value in pairs}


def parse_table(text):
    """({cluster name: slurm.conf path}, marker) of `ci/local-slurm.sh table`."""
    clusters, marker = {}, None
    for line in text.splitlines():
        words = line.split(" ", 2)
        if words[0] == "marker":
            marker = line[len("marker "):]
        elif len(words) == 3:
            clusters[words[1]] = words[2]
    return clusters, marker


def foreign_reason(config, clusters, marker, first_line):
    """Why the cluster `config` describes is not the project's local one, or None.

    first_line(path) is the first line of that file, or None when it cannot be read."""
    name, conf = config.get("ClusterName"), config.get("SLURM_CONF")
    if name not in clusters:
        return "cluster '%s' is not the project's local test cluster (ci/local-slurm.sh)" % name
    if conf != clusters[name]:
        return "cluster '%s' reads %s, not %s that ci/local-slurm.sh writes" % (
            name, conf, clusters[name])
    line = first_line(conf)
    if not marker or not (line or "").startswith(marker):
        return "cluster '%s': %s was not written by ci/local-slurm.sh (its first line: %r)" % (
            name, conf, line)
    return None


def first_line(path):
    try:
        with open(path) as handle:
            return handle.readline().rstrip("\n")
    except (IOError, OSError):
        return None


def not_local_reason(environ=None):
    """Why the cluster the Slurm commands on PATH reach must not be used, or None when it is
    provably the project's local test cluster."""
    def run(argv):
        try:
            result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    universal_newlines=True, env=environ, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as error:
            return None, "%s: %s" % (argv[0], error)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        return (result.stdout, None) if result.returncode == 0 else (
            None, "%s: %s" % (" ".join(argv), lines[-1] if lines else "exit %d" % result.returncode))
    config, problem = run(["scontrol", "show", "config"])
    if problem:
        return "no Slurm cluster (%s)" % problem
    table, problem = run(["bash", LOCAL_SLURM, "table"])
    if problem:
        return problem
    clusters, marker = parse_table(table)
    return foreign_reason(parse_config(config), clusters, marker, first_line)
