"""The README's code blocks, run: every command of the module for real against the fake Slurm
in a scratch directory, as a user would type them top to bottom; the demo and the test
command checked for what they call. A command added to the README that no runner here knows
fails the test, so the quick start cannot rot."""
import os
import py_compile
import re
import shlex
import shutil
import subprocess
import sys

import pytest

import resumable_chain as rc
from fake_cluster import BASH, ROOT

README = os.path.join(ROOT, "README.md")
MAX_LINES = 300  # issue 30: a README people finish reading
COMMANDS = ("submit", "status", "cancel", "resume", "render", "budget")  # run for real
DEMO = ["python3", "demo/chain.py"]
TESTS = shlex.split("python3 -m pip install -q pytest && python3 -m pytest -q -rs")
# What the README's placeholders stand for, created in the scratch directory before they run.
BATCH_SCRIPT = '#!/bin/bash\n#SBATCH --time=10\n#SBATCH -c 1\necho "work $*"\n'
WORK_PROGRAM = 'print("training")\n'


def code_blocks(text):
    """[(language, line number of the first line, [lines])] of the fenced blocks in ``text``."""
    blocks, block = [], None
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^```(\S*)\s*$", line)
        if fence and block is None:
            block = (fence.group(1), number + 1, [])
        elif line.strip() == "```" and block is not None:
            blocks.append(block)
            block = None
        elif block is not None:
            block[2].append(line)
    assert block is None, "README: a code block opened at line %d is never closed" % block[1]
    return blocks


def command_lines(blocks):
    """[(line number, line, words)] of every command in the README's bash blocks (job scripts,
    which start with #!, are not commands)."""
    found = []
    for language, first, lines in blocks:
        if language != "bash" or lines[0].startswith("#!"):
            continue
        for offset, line in enumerate(lines):
            words = shlex.split(line, comments=True)
            if words:
                found.append((first + offset, line, words))
    return found


def runner(words):
    """What checks a README command: 'module' (run for real), 'demo', 'tests'; None: unknown."""
    if words[:2] == ["python3", "resumable_chain.py"] and len(words) > 2 and words[2] in COMMANDS:
        return "module"
    return {tuple(DEMO): "demo", tuple(TESTS): "tests"}.get(tuple(words))


def readme_text():
    with open(README) as handle:
        return handle.read()


# -- the shape of the README ----------------------------------------------------------------

def test_the_readme_is_short_enough_to_finish_reading():
    assert len(readme_text().splitlines()) <= MAX_LINES


def test_every_code_block_says_what_it_holds():
    """bash: commands or a job script; python: run; text: output or usage. Nothing else, so
    that no command hides in a block this test does not read."""
    for language, first, lines in code_blocks(readme_text()):
        assert language in ("bash", "python", "text"), (
            "README line %d: a ```%s block: use bash, python or text" % (first - 1, language))


def test_every_command_in_the_readme_has_a_runner():
    unknown = [(number, line) for number, line, words in command_lines(code_blocks(readme_text()))
               if runner(words) is None]
    assert unknown == [], "README commands that tests/test_readme.py cannot run: %r" % unknown


@pytest.mark.parametrize("line,known", [
    ("python3 resumable_chain.py status runs/a", True),
    ("python3 resumable_chain.py frobnicate runs/a", False),   # a command the module lacks
    ("sbatch train.sbatch", False),                            # a Slurm command: nothing runs it
    ("python3 demo/chain.py --partition debug", False),        # the demo, differently: unchecked
    ("python3 -m pytest -q", False),                           # another test command
])
def test_a_new_readme_command_without_a_runner_is_caught(line, known):
    text = "intro\n\n```bash\n%s    # a comment\n```\n" % line
    [(number, _, words)] = command_lines(code_blocks(text))
    assert number == 4 and (runner(words) is not None) == known


def test_the_usage_lines_name_only_options_each_command_has():
    usage = [line for language, _, lines in code_blocks(readme_text()) if language == "text"
             for line in lines if line.startswith("python3 resumable_chain.py ")]
    assert {line.split()[2] for line in usage} == set(COMMANDS)
    for line in usage:
        command = line.split()[2]
        helped = subprocess.run([sys.executable, os.path.join(ROOT, "resumable_chain.py"), command,
                                 "--help"], stdout=subprocess.PIPE, universal_newlines=True)
        assert helped.returncode == 0
        for option in re.findall(r"\[(--[a-z-]+)", line):
            assert option in helped.stdout, "README: %s %s is not in its --help" % (command, option)


# -- the two top commands -------------------------------------------------------------------

def test_the_demo_command_runs_a_script_that_compiles_and_answers_help(tmp_path):
    demo = os.path.join(ROOT, DEMO[1])
    py_compile.compile(demo, cfile=str(tmp_path / "demo.pyc"), doraise=True)
    local_slurm = os.path.join(ROOT, "ci", "local-slurm.sh")  # what it runs when no cluster answers
    assert subprocess.run([BASH, "-n", local_slurm]).returncode == 0
    # --help stops before any cluster is looked for; no Slurm command is on this PATH anyway
    helped = subprocess.run([sys.executable, demo, "--help"], env={"PATH": python_dir(tmp_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                            cwd=ROOT)
    assert helped.returncode == 0 and "usage:" in helped.stdout, helped.stderr


def test_the_test_command_collects_the_suite_without_running_it(tmp_path):
    """pip and pytest answer, and pytest collects every test from the top directory with the
    README's options; running the suite from inside it would recurse."""
    for module in ("pip", "pytest"):
        assert subprocess.run([sys.executable, "-m", module, "--version"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE).returncode == 0, module
    options = TESTS[len(TESTS) - TESTS[::-1].index("pytest"):]  # after "-m pytest"
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:randomly"] + options,
        env={"PATH": python_dir(tmp_path), "HOME": str(tmp_path)}, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr
    assert re.search(r"^(\d+) tests collected", collected.stdout, re.M), collected.stdout[-500:]
    assert "tests/test_readme.py::" in collected.stdout


# -- every command of the module, run ------------------------------------------------------

def python_dir(tmp_path):
    """A directory whose only program is python3: this interpreter."""
    directory = os.path.join(str(tmp_path), "python-bin")
    if not os.path.isdir(directory):
        os.makedirs(directory)
        os.symlink(sys.executable, os.path.join(directory, "python3"))
    return directory


class Walkthrough(object):
    """A user at a shell in a scratch directory with a copy of the module, and a fake Slurm that
    starts each queued job without a dependency as soon as it may (a first or resumed link)."""

    def __init__(self, cluster, tmp_path):
        self.cluster = cluster
        self.home = str(tmp_path / "home")
        os.makedirs(self.home)
        shutil.copy(os.path.join(ROOT, "resumable_chain.py"), self.home)  # as a user vendors it
        self.path = cluster.bin + os.pathsep + python_dir(tmp_path)  # fakes first, no real Slurm
        self.started = []
        self.status_output = None  # what the last status command printed

    def env(self, job_id=None):
        return self.cluster.env(job_id, PATH=self.path, HOME=self.home, WEBHOOK_URL="http://x.test")

    def placeholders(self, line):
        """Create the scripts a command names, as the user would have them."""
        for word in shlex.split(line, comments=True):
            if word.endswith((".sbatch", ".py")) and not os.path.exists(
                    os.path.join(self.home, word)):
                with open(os.path.join(self.home, word), "w") as handle:
                    handle.write(BATCH_SCRIPT if word.endswith(".sbatch") else WORK_PROGRAM)

    def shell(self, number, line):
        self.placeholders(line)
        result = subprocess.run([BASH, "-c", line], env=self.env(), cwd=self.home,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True, timeout=120)
        assert result.returncode == 0, "README line %d: %s\nexit %d\n%s%s" % (
            number, line, result.returncode, result.stdout, result.stderr)
        if shlex.split(line, comments=True)[2] == "status":
            self.status_output = result.stdout
        self.slurm_starts_what_is_due()
        return result

    def slurm_starts_what_is_due(self):
        for job_id, job in sorted(self.cluster.load()["jobs"].items(), key=lambda i: int(i[0])):
            if job["state"] == "PENDING" and not job.get("held") and not job.get("wrap") \
                    and not job.get("dependency"):
                self.run_job(job_id, job)

    def run_job(self, job_id, job):
        spool = os.path.join(self.cluster.root, "spool.%s" % job_id)  # Slurm runs its own copy
        with open(spool, "w") as handle:
            handle.write(job["script_text"])
        self.cluster.set_job(job_id, state="RUNNING", start="2026-11-30T01:00:00")
        result = subprocess.run([BASH, spool] + job["args"], env=self.env(job_id), cwd=job["cwd"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True, timeout=120)
        assert result.returncode == 0, "job %s: %s" % (job_id, result.stderr)
        self.started.append(job_id)  # its work is done; Slurm still shows it RUNNING
        return result

    def python(self, number, lines):
        """Run a python block in the scratch directory, which holds the vendored module; each
        ``print(...)  # X`` must print X."""
        result = subprocess.run([sys.executable, "-"], input="\n".join(lines) + "\n",
                                env=self.env(), cwd=self.home, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        assert result.returncode == 0, "README line %d: %s" % (number, result.stderr)
        printed = result.stdout.splitlines()
        for line in lines:
            expected = re.match(r"^print\(.*\)  # (.*)$", line)
            if expected:
                assert expected.group(1) in printed, "README line %d: %s printed %r" % (
                    number, line, printed)
        self.slurm_starts_what_is_due()

    def job_script(self, number, lines):
        """A hand-written job script: the prologue ``render`` printed pasted in, then run by
        Slurm as the first link of a chain."""
        with open(os.path.join(self.home, "prologue.sh")) as handle:
            prologue = handle.read()
        start = next(i for i, line in enumerate(lines) if line.startswith("# >>> resumable_chain"))
        end = next(i for i, line in enumerate(lines) if line.startswith("# <<< resumable_chain"))
        assert lines[start] in prologue and lines[end] in prologue, "README line %d" % number
        script = "\n".join(lines[:start]) + "\n" + prologue + "\n".join(lines[end + 1:]) + "\n"
        path = os.path.join(self.home, "job.sbatch")
        with open(path, "w") as handle:
            handle.write(script)
        for output in re.findall(r"^#SBATCH --output=(\S+)/", script, re.M):  # exists already
            assert os.path.isdir(os.path.join(self.home, output)), "README line %d" % number
        self.placeholders(" ".join(lines[end + 1:]))
        submitted = subprocess.run([BASH, "-c", "sbatch --parsable job.sbatch"], env=self.env(),
                                   cwd=self.home, stdout=subprocess.PIPE, universal_newlines=True)
        job_id = submitted.stdout.strip()
        self.slurm_starts_what_is_due()
        assert job_id in self.started
        return job_id


def sample_matches_status(number, sample, printed):
    """A sample of status output (written for a chain further on than the walkthrough's) has the
    real table header and only lines that status prints."""
    assert printed, "README line %d: a status sample before any status command" % number
    real = printed.splitlines()
    assert sample[0].split(":")[0].split()[:2] == real[0].split()[:2]
    assert sample[1].split() == real[1].split(), "README line %d: the table's header" % (number + 1)
    keys = {line.split(": ")[0] for line in real if ": " in line and not line[0].isdigit()}
    for offset, line in enumerate(sample[2:], 2):
        if not line[0].isdigit():  # a job's row is a chain's own; the rest is status's wording
            assert line.split(": ")[0] in keys, "README line %d: %s" % (number + offset, line)


def test_every_readme_command_works_in_order_against_the_fake_slurm(cluster, tmp_path):
    user = Walkthrough(cluster, tmp_path)
    ran = []
    for language, first, lines in code_blocks(readme_text()):
        if language == "python":
            user.python(first, lines)
        elif language == "text" and lines[0].startswith("chain in "):
            sample_matches_status(first, lines, user.status_output)
        elif language == "bash" and lines[0].startswith("#!"):
            job = user.job_script(first, lines)
            assert any(queued.get("dependency") == "afternotok:%s" % job  # its successor
                       for queued in cluster.load()["jobs"].values()), "README line %d" % first
        elif language == "bash":
            for offset, line in enumerate(lines):
                words = shlex.split(line, comments=True)
                if words and runner(words) == "module":
                    user.shell(first + offset, line)
                    ran.append(words[2])
    # the quick start as a user works it: submit, status, cancel, resume; then the rest
    assert ran[:4] == ["submit", "status", "cancel", "resume"]
    assert set(ran) == set(COMMANDS)
    assert len(user.started) >= 3  # the first link, the resumed link, the hand-written script


def test_the_journal_field_table_lists_every_record_field_in_order():
    with open(os.path.join(ROOT, "docs", "state-files.md")) as handle:
        text = handle.read()
    table = text.split("## The journal's fields")[1].split("\n## ")[0]
    assert tuple(re.findall(r"^\| `(\w+)` \|", table, re.M)) == rc.RECORD_FIELDS


def test_how_it_works_names_a_links_steps_in_the_files_order():
    # Issue 29's reading test: the README's "How it works" names the functions of one link's
    # life; each is the module's, run_link names them all, and the file has them in that order.
    with open(README) as handle:
        section = handle.read().split("## How it works", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"`(\w+)`", section)
    with open(rc.__file__) as handle:
        source = handle.read()
    where = [source.find("\ndef %s(" % name) for name in names]
    assert names[:2] == ["run_link", "identify"] and -1 not in where, names
    assert where == sorted(where), sorted(zip(where, names))
    run_link = source[where[0]:source.find("\ndef ", where[0] + 1)]
    steps = names[1:names.index("guard_chain")]
    assert all(name in run_link for name in steps if name != "finish_queueing"), steps


def test_the_readme_names_every_cause_and_every_verdict_word():
    text = readme_text()
    causes = [cause for cause in rc.STOP_CAUSES if cause is not None]
    assert [cause for cause in causes if "`%s`" % cause not in text] == []
    table = text[text.index("## Troubleshooting"):text.index("## Trust model")]
    words = sorted({verdict[0] for verdict in rc.VERDICTS.values()})
    assert [word for word in words if "| `%s: " % word not in table] == []
    assert "never starts by itself" in table  # a --check failure a new user meets (issue 30)
