"""A fake Slurm cluster for tests: tests/fake_slurm.py on PATH, and chain links run by bash."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import fake_slurm  # noqa: E402
import resumable_chain  # noqa: E402

FAKE = os.path.join(HERE, "fake_slurm.py")
BASH = shutil.which("bash") or "/bin/bash"
COMMANDS = ("sbatch", "sacct", "scontrol", "squeue", "scancel", "sacctmgr")


class FakeCluster(object):
    """A fake Slurm cluster: JSON state, recorded calls, and bash-run chain links."""

    def __init__(self, root, python=sys.executable, tool_python=sys.executable):
        self.root = root
        self.bin = os.path.join(root, "bin")
        os.makedirs(self.bin)
        self.state_path = os.path.join(root, "cluster.json")
        for command in COMMANDS:
            wrapper = os.path.join(self.bin, command)
            with open(wrapper, "w") as handle:
                # -I -S: real Slurm commands are C programs that no job's Python setup can break
                handle.write('#!/bin/sh\nexec "%s" -I -S "%s" %s "$@"\n' % (tool_python, FAKE, command))
            os.chmod(wrapper, 0o755)
        self.save({"jobs": {}, "next_id": 1000})
        self.python = python
        self.worklog = os.path.join(root, "work.log")

    # -- cluster state -------------------------------------------------------
    def load(self):
        return fake_slurm.load(self.state_path)

    def save(self, cluster):
        fake_slurm.save(self.state_path, cluster)

    def update(self, **settings):
        cluster = self.load()
        cluster.update(settings)
        self.save(cluster)

    def set_job(self, job_id, **fields):
        cluster = self.load()
        job = cluster["jobs"].setdefault(str(job_id), {"state": "PENDING", "elapsed": 0,
                                                       "start": "Unknown", "end": "Unknown"})
        job.update(fields)
        self.save(cluster)

    def job(self, job_id):
        return self.load()["jobs"].get(str(job_id))

    def calls(self, command=None, guards=False):
        """The recorded calls of ``command`` (all: None); a guard's sbatch (--wrap) only with
        ``guards``: tests count the links queued."""
        path = self.state_path + ".calls"
        if not os.path.exists(path):
            return []
        with open(path) as handle:
            records = [json.loads(line) for line in handle]
        for record in records:  # root's scancel names its user (test_trust checks what for)
            if record["command"] == "scancel" and record["argv"][:1] == ["--user=root"]:
                record["argv"] = record["argv"][1:]
        return [record for record in records if command in (None, record["command"]) and (
            guards or "--wrap" not in record["argv"])]

    def pending(self):
        """The pending links (guards are not links: see guards())."""
        return sorted((job_id for job_id, job in self.load()["jobs"].items()
                       if job["state"] == "PENDING" and not job.get("wrap")), key=int)

    def guards(self, state="PENDING"):
        """{guarded job: guard} of the guards in ``state`` (any state: None)."""
        return {job["dependency"].split(":")[1]: job_id for job_id, job in sorted(
            self.load()["jobs"].items(), key=lambda item: int(item[0]))
            if job.get("wrap") and state in (None, job["state"])}

    def run_guard(self, guarded, **extra):
        """Run the guard of job ``guarded`` as Slurm would once that job ended (sbatch --wrap)."""
        guard = self.guards()[str(guarded)]
        self.set_job(guard, state="RUNNING", start="2026-11-30T03:00:00")
        wrap = self.job(guard)["wrap"]
        kept = next((call["env"] for call in reversed(self.calls("sbatch", guards=True))
                     if call["argv"][-1] == wrap), {})  # Slurm exports sbatch's environment
        result = subprocess.run([BASH, "-c", wrap], env=self.env(guard, **dict({
            name: value for name, value in kept.items()
            if name.startswith(resumable_chain.KEPT_SBATCH)}, **extra)), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                                cwd=self.root)
        self.set_job(guard, state="COMPLETED" if result.returncode == 0 else "FAILED")
        output = [word.split("=", 1)[1] for word in self.job(guard)["options"]
                  if word.startswith("--output=")]
        for path in output:  # where Slurm writes a batch job's output (--open-mode=append)
            with open(path, "a") as handle:
                handle.write(result.stdout + result.stderr)
        return result

    # -- running links ---------------------------------------------------------
    def env(self, job_id=None, dependency=None, **extra):
        # Only the fakes on PATH: a real Slurm on this machine must never answer a unit test.
        environ = {"PATH": self.bin,
                   "HOME": os.environ.get("HOME", "/root"), "FAKE_SLURM_STATE": self.state_path,
                   "WORKLOG": self.worklog, "RESUMABLE_CHAIN_LOOKUP_SECONDS": "0",
                   "RESUMABLE_CHAIN_VIEW_WAIT": "0",  # a guard trusts its first look here
                   "LANG": "C.UTF-8"}
        if job_id is not None:
            environ["SLURM_JOB_ID"] = str(job_id)
            environ["SLURM_JOB_NAME"] = "job.sh"
            environ["SLURM_CLUSTER_NAME"] = self.load().get("name", "local")
            job = self.job(job_id) or {}
            if job.get("array"):  # a one-task array: its task
                environ.update(SLURM_ARRAY_TASK_ID=job["array"], SLURM_ARRAY_JOB_ID=str(job_id))
            if job.get("cwd"):  # where its sbatch ran, as Slurm sets it
                environ["SLURM_SUBMIT_DIR"] = job["cwd"]
        if dependency:
            environ["SLURM_JOB_DEPENDENCY"] = dependency
        environ.update({key: str(value) for key, value in extra.items()})
        return environ

    def write_script(self, run_dir, strict=True, name="job.sh", work="", shebang="#!/bin/bash",
                     **render_options):
        """A job script: #SBATCH lines, the rendered prologue, ``work``, then a line in WORKLOG."""
        render_options.setdefault("python", self.python)
        prologue = resumable_chain.render_prologue(run_dir, **render_options)
        script = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(script), exist_ok=True)
        with open(script, "w") as handle:
            handle.write(shebang + "\n#SBATCH --time=10\n#SBATCH --mem=1G\n")
            if strict:
                handle.write("set -euo pipefail\n" if "bash" in shebang else "set -eu\n")
            handle.write(prologue)
            handle.write(work)
            handle.write('echo "$SLURM_JOB_ID $*" >> "$WORKLOG"\n')
        return script

    def run_link(self, script, job_id, predecessor=None, args=(), timeout=120, mark_running=True,
                 cwd=None, shell=(BASH,), **extra):
        dependency = "afternotok:%s" % predecessor if predecessor else None
        if mark_running:  # as Slurm would show it; threads racing set it beforehand instead
            self.set_job(job_id, state="RUNNING", start="2026-11-30T01:00:00")
        # SLURM_TASK_PID is the batch shell, as Slurm sets it: a background step ends with it.
        return subprocess.run([BASH, "-c", 'SLURM_TASK_PID=$$ exec "$@"', BASH] + list(shell)
                              + [script] + list(args), env=self.env(job_id, dependency, **extra),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout, cwd=cwd or self.root)

    def finish(self, job_id, state, elapsed):
        self.set_job(job_id, state=state, elapsed=elapsed, end="2026-11-30T02:00:00")

    def work_done(self):
        if not os.path.exists(self.worklog):
            return []
        with open(self.worklog) as handle:
            return [line.split()[0] for line in handle if line.strip()]

def find_interpreters():
    """Return {"3.X": path} for every CPython 3.6-3.13 found (pyenv versions, then /usr/bin)."""
    candidates = []
    try:
        root = subprocess.run(["pyenv", "root"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              universal_newlines=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        root = os.path.expanduser("~/.pyenv")
    for directory in sorted(glob.glob(os.path.join(root or "/nonexistent", "versions", "3.*"))):
        candidates.append(os.path.join(directory, "bin", "python3"))
    candidates += sorted(glob.glob("/usr/bin/python3.[0-9]*"))
    found = {}
    for path in candidates:
        match = re.search(r"(?:versions/|python)(3\.[0-9]+)", path)
        if not match or not os.access(path, os.X_OK) or match.group(1) in found:
            continue
        minor = int(match.group(1).split(".")[1])
        if 6 <= minor <= 13 and not path.endswith("-config"):
            found[match.group(1)] = path
    return found


BY_PATH = "python3 " + resumable_chain.shell_quote(resumable_chain.module_path())  # how we run


def run_cli(cluster, capsys, monkeypatch, *argv):
    """Run the command line in-process against the fake cluster: (status, stdout, stderr)."""
    for name, value in cluster.env().items():
        monkeypatch.setenv(name, value)
    status = resumable_chain.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def read(run_dir, name):
    with open(os.path.join(run_dir, name)) as handle:
        return handle.read()


def start_chain(cluster, run_dir, first=100, **render_options):
    """Run the first link; return (script, successor ID)."""
    script = cluster.write_script(run_dir, **render_options)
    result = cluster.run_link(script, first, args=["--lr", "3e-4"])
    assert result.returncode == 0, result.stderr
    successor = cluster.pending()[-1]
    return script, successor
