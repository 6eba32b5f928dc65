"""--warn SIG@SECONDS: the work hears before its link ends (issue 31, part 2), and
RESUMABLE_CHAIN_END, the end it is computed from."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import resumable_chain as rc
from fake_cluster import BASH, read, run_cli, start_chain
from test_operations import failed_chain


@pytest.mark.parametrize("text, expected", [
    ("USR1@20", "USR1@20"),
    ("SIGUSR2@600", "USR2@600"),
    ("usr1@0090", "USR1@90"),
    ("10@60", "USR1@60"),  # a number, as Slurm's --signal takes it
    ("TERM@1", "TERM@1"),
])
def test_a_warning_is_written_as_slurm_writes_a_signal(text, expected):
    assert rc.check_warn(text) == expected


@pytest.mark.parametrize("text", [
    "KILL@30",  # cannot be caught: it would only kill the work early
    "STOP@30",
    "USR1",  # no time
    "USR1@0",
    "USR1@-5",
    "USR1@1.5",
    "NOPE@30",
    "SIG_UNBLOCK@120",  # a constant of Python's signal module, not a signal
    "_SETMASK@5",
    "99@30",
    "@30",
])
def test_a_warning_no_work_can_catch_is_refused(text):
    with pytest.raises(ValueError, match="SIG@SECONDS"):
        rc.check_warn(text)


@pytest.mark.parametrize("start, limit, caps, end", [
    (1000, 600, [], 1600),  # the time limit ends it
    (1000, 600, [330], 1300),  # lowered for --max-walltime to its 5 whole minutes
    (1000, 600, [900, 480], 1480),  # the budget's reservation is the tightest
    (1000, 600, [3600], 1600),  # a cap beyond the limit changes nothing
    (1000, None, [125], 1120),  # UNLIMITED: the cap itself ends it
    (1000, None, [], None),  # nothing ends it
    (None, 600, [], None),  # start not known
])
def test_a_link_ends_at_its_limit_or_the_limit_its_caps_lower_it_to(start, limit, caps, end):
    assert rc.link_end(start, limit, caps) == end


@pytest.mark.parametrize("record, caps", [
    (rc.Record(max_walltime=600, walltime=73), [527]),
    (rc.Record(max_walltime=None, walltime=73, reserved=300), [300]),
    (rc.Record(max_walltime=600, walltime=0, reserved=300), [600, 300]),
    (rc.Record(walltime=0), []),
])
def test_the_caps_a_link_is_lowered_to(record, caps):
    assert rc.link_caps(record) == caps


@pytest.mark.parametrize("environ, expected", [
    ({"SLURM_JOB_START_TIME": "1000", "SLURM_JOB_END_TIME": "1600"}, (1000, 600)),
    ({}, (None, None)),  # before 23.02: fit_own_limit asks the controller if it must
    # no time limit (UNLIMITED): Slurm ends it a year after its start (job_mgr.c), and the work
    # is told no end (a new-user trial on 26.05 saw RESUMABLE_CHAIN_END a year on)
    ({"SLURM_JOB_START_TIME": "1000", "SLURM_JOB_END_TIME": str(1000 + 365 * 86400)},
     (1000, None)),
])
def test_the_start_and_limit_come_from_slurms_variables(environ, expected):
    assert rc.job_start_and_limit(environ) == expected


STATUS = "Name:\tpython3\nSigBlk:\t0000000000000000\nSigIgn:\t%s\nSigCgt:\t%s\n"


@pytest.mark.parametrize("ignored, caught, signum, expected", [
    ("0000000000000000", "0000000000000200", signal.SIGUSR1, True),  # bit 10 - 1
    ("0000000000000000", "0000000000000800", signal.SIGUSR2, True),
    ("0000000000000000", "0000000000000800", signal.SIGUSR1, False),  # default: would die
    ("0000000000000200", "0000000000000000", signal.SIGUSR1, False),  # ignores it
    ("0000000000000000", "0000000000004000", signal.SIGTERM, True),
])
def test_only_a_process_that_catches_the_signal_gets_it(ignored, caught, signum, expected):
    assert rc.catches(STATUS % (ignored, caught), signum) is expected


@pytest.mark.parametrize("program, caught, expected", [
    ("python3", "0000000000000200", True),
    ("python3", "0000000000000000", False),  # no handler: a USR1 would kill it
    ("srun", "0000000000000000", True),  # 22.05's srun blocks it for its signal thread (seen)
])
def test_srun_always_gets_the_warning_to_forward_it(program, caught, expected):
    status = STATUS % ("0000000000000000", caught)
    assert rc.wants_signal(program, status, signal.SIGUSR1) is expected


@pytest.mark.parametrize("program, caught, signum, expected", [  # masks seen: bash 5.2, dash
    ("bash", "0000000000010202", signal.SIGUSR1, True),  # trap ... USR1
    ("dash", "0000000000010202", signal.SIGUSR1, True),
    ("bash", "0000000000010002", signal.SIGUSR1, False),  # no trap: it would die
    ("bash", "0000000043817efb", signal.SIGUSR1, False),  # an EXIT trap: its script says
    ("bash", "0000000000010002", signal.SIGINT, False),  # a shell's own SIGINT handler
    ("bash", "0000000000014000", signal.SIGTERM, True),  # trap ... TERM
], ids=["bash traps USR1", "dash traps USR1", "bash without a trap", "bash with an EXIT trap",
        "bash and SIGINT", "bash traps TERM"])
def test_a_shell_gets_the_warning_when_it_traps_it_as_its_sigcgt_says(
        program, caught, signum, expected):
    status = STATUS % ("0000000000000000", caught)
    assert rc.wants_signal(program, status, signum) is expected


@pytest.mark.parametrize("argv, script", [
    (["BASH", "job.sh", "-c", "config.yaml"], "FILE"),  # the batch shell, the script's own -c
    (["BASH", "-o", "pipefail", "job.sh"], "FILE"),
    (["BASH", "-ec", "trap h USR1; sleep 30"], "trap h USR1; sleep 30"),
], ids=["a script's argument -c", "an option's value", "-c in a cluster"])
def test_the_script_a_shell_runs_is_read_from_its_command_line(tmp_path, argv, script):
    text = "trap h USR1\nsleep 30\n"
    (tmp_path / "job.sh").write_text(text)
    shell = subprocess.Popen([BASH if word == "BASH" else word for word in argv],
                             cwd=str(tmp_path))  # job.sh: relative to the shell's directory
    try:
        time.sleep(0.5)
        assert rc.shell_script(shell.pid) == (text if script == "FILE" else script)
    finally:
        shell.kill()
        shell.wait()


def test_a_shell_with_an_exit_trap_gets_the_warning_when_its_script_traps_it():
    status = STATUS % ("0000000000000000", "0000000043817efb")
    assert rc.wants_signal("bash", status, signal.SIGUSR1, "trap 'save; exit 75' USR1\n")
    assert not rc.wants_signal("bash", status, signal.SIGUSR2, "trap 'save; exit 75' USR1\n")


@pytest.mark.parametrize("script, expected", [
    ("trap 'save; exit 75' USR1\n", True),
    ("trap -- \"kill $pid\" SIGUSR1 TERM  # comment\n", True),
    ("trap on_usr1 10; python3 train.py & wait $!\n", True),
    ("trap 'echo USR1' TERM\n", False),  # the handler's words are not signals
    ("trap finish EXIT\necho USR1\n", False),
    ("trap 'a\nb' USR1\n", False),  # a handler over two lines is not read
    ("trap - USR1\ntrap -p USR1\ntrap '' USR1\n", False),  # reset, print, ignore: no handler
    ("trap -- USR1 TERM\n", False),  # USR1 is the handler here
    ("cat > child.sh <<'EOF'\ntrap save USR1\nEOF\n", False),  # another script's line
    ("cat > child.sh <<EOF\ntrap save USR1\nEOF\ntrap save USR1\n", True),
    ("setup() {\n  trap save USR1\n}\n", False),  # indented: a function, block or subshell
], ids=["quoted handler", "-- and SIG prefix", "number and a ; after it", "USR1 in the handler",
        "only an EXIT trap", "a handler over lines", "no handler", "-- then the handler",
        "in a here-document", "after a here-document", "indented"])
def test_a_scripts_trap_lines_say_whether_it_traps_the_signal(script, expected):
    assert rc.traps(script, signal.SIGUSR1) is expected


@pytest.mark.parametrize("text, expected", [
    ("42 (python3) S 7 42 42 0 -1", (42, 7)),
    ("43 (a ) b (c) S 42 43 1 0", (43, 42)),  # a command name with spaces and parentheses
    ("", None),
])
def test_a_process_parent_is_read_from_proc_stat(text, expected):
    assert rc.parse_proc_stat(text) == expected


def test_the_work_is_the_batch_shell_and_its_descendants_whatever_their_group():
    parents = {1: 0, 10: 1, 11: 10, 12: 11, 13: 1, 14: 13}
    assert rc.work_processes(parents, 10) == [10, 11, 12]


WORKER = r'''
import os, signal, sys, time
name, log, signum = sys.argv[1], sys.argv[2], int(sys.argv[3])
if name == "group":
    os.setsid()  # a work that starts its own process group (and session)
def say(text):
    with open(log, "a") as handle:
        handle.write(text + "\n")
def on_signal(signum, frame):
    say("%s got %d" % (name, signum))
    sys.exit(0)
signal.signal(signum, on_signal)
say(name + " ready")
time.sleep(120)
say(name + " never warned")
'''

BATCH = r'''#!%s
trap 'echo "exit trap ran" >> "$DIR/log"' EXIT  # as the prologue renders: bash catches all
sleep 120 &  # a work that leaves USR1 at its default (it would die of it)
echo $! > "$DIR/sleeper.pid"
"$PY" "$DIR/worker.py" group "$DIR/log" "$SIG" &
"$PY" "$DIR/worker.py" plain "$DIR/log" "$SIG"  # a plain command in the foreground
echo "shell survived" >> "$DIR/log"
wait $!
'''


def _lines(path):
    try:
        with open(path) as handle:
            return handle.read().splitlines()
    except OSError:
        return []


@pytest.mark.parametrize("signame", ["USR1", "INT"])  # bash has a handler of its own for INT
def test_the_warning_reaches_a_plain_command_and_a_child_process_group_and_harms_nothing_else(
        tmp_path, capsys, signame):
    (tmp_path / "worker.py").write_text(WORKER)
    log = str(tmp_path / "log")
    signum = int(getattr(signal, "SIG" + signame))
    # as slurmd names a job script: its comm is no shell's
    (tmp_path / "slurm_script").write_text(BATCH % BASH)
    os.chmod(str(tmp_path / "slurm_script"), 0o755)
    shell = subprocess.Popen([str(tmp_path / "slurm_script")], env=dict(
        os.environ, DIR=str(tmp_path), PY=sys.executable, SIG=str(signum)))
    try:
        for _ in range(600):  # both have their handler before the warning
            if {"plain ready", "group ready"} <= set(_lines(log)):
                break
            time.sleep(0.05)
        end = int(time.time()) + 20  # the moment has come: USR1@20
        assert rc.warn_command(signame + "@20", str(end), str(shell.pid)) == 0
        assert shell.wait(timeout=60) == 0
        with open(str(tmp_path / "sleeper.pid")) as handle:
            sleeper = int(handle.read())
        os.kill(sleeper, 0)  # still alive: not signalled
        os.kill(sleeper, signal.SIGTERM)
    finally:
        if shell.poll() is None:
            shell.kill()
    assert sorted(_lines(log)) == sorted(["group got %d" % signum, "group ready",
                                   "plain got %d" % signum, "plain ready", "shell survived",
                                   "exit trap ran"])
    said = capsys.readouterr().err  # 20 s, or a little less on a loaded machine
    sent = re.search(r"SIG%s sent (\d+) s before the link ends to pids" % signame, said)
    assert sent and 15 <= int(sent.group(1)) <= 20, said


TRAP_BATCH = r'''#!%s
%s
sleep 3 & wait $!  # the idiom: bash runs a trap only once its foreground command ended
echo "shell survived" >> "$DIR/log"
'''


@pytest.mark.parametrize("traps, status, heard", [
    ("trap 'echo trapped >> \"$DIR/log\"; exit 75' USR1", 75, ["trapped"]),
    ("", 0, ["shell survived"]),
    ("trap 'echo trapped >> \"$DIR/log\"; exit 75' USR1; trap 'echo exit trap >> \"$DIR/log\"' "
     "EXIT", 75, ["trapped", "exit trap"]),
    ("trap 'echo exit trap >> \"$DIR/log\"' EXIT", 0, ["shell survived", "exit trap"]),
], ids=["its own trap", "no trap: left alone", "an EXIT trap too (--notify's): its trap line says",
        "an EXIT trap only: left alone"])
def test_a_batch_script_that_traps_the_signal_itself_hears_it(tmp_path, capsys, traps, status,
                                                              heard):
    (tmp_path / "slurm_script").write_text(TRAP_BATCH % (BASH, traps))
    os.chmod(str(tmp_path / "slurm_script"), 0o755)
    shell = subprocess.Popen([str(tmp_path / "slurm_script")], env=dict(os.environ,
                                                                         DIR=str(tmp_path)))
    try:
        time.sleep(1)  # its trap is set
        assert rc.warn_command("USR1@20", str(int(time.time()) + 20), str(shell.pid)) == 0
        assert shell.wait(timeout=60) == status
    finally:
        if shell.poll() is None:
            shell.kill()
    assert _lines(str(tmp_path / "log")) == heard
    said = capsys.readouterr().err
    assert ("SIGUSR1 sent 20 s before the link ends to pids" in said) is (status == 75), said
    assert ("SIGUSR1 not sent" in said and "no process of the work catches it" in said) is (
        status == 0), said


LATE_BATCH = r'''#!%s
sleep "$DELAY"  # the work sets its handler only after the moment has passed
"$PY" "$DIR/worker.py" plain "$DIR/log" "$SIG"
'''


@pytest.mark.parametrize("end_in, handler_in", [(15, 2), (23, 5)],
                         ids=["due before the timer starts", "due in the work's first seconds"])
def test_a_warning_due_as_the_link_starts_reaches_the_work_once_it_catches_it(
        tmp_path, capsys, end_in, handler_in):
    """A cap lowered the link's end to about USR1@20: the timer waits for a catcher."""
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "slurm_script").write_text(LATE_BATCH % BASH)
    os.chmod(str(tmp_path / "slurm_script"), 0o755)
    shell = subprocess.Popen([str(tmp_path / "slurm_script")], env=dict(
        os.environ, DIR=str(tmp_path), PY=sys.executable, SIG=str(int(signal.SIGUSR1)),
        DELAY=str(handler_in)))
    try:
        assert rc.warn_command("USR1@20", str(int(time.time()) + end_in), str(shell.pid)) == 0
        assert shell.wait(timeout=60) == 0
    finally:
        if shell.poll() is None:
            shell.kill()
    assert _lines(str(tmp_path / "log")) == ["plain ready", "plain got %d" % signal.SIGUSR1]
    assert re.search(r"SIGUSR1 sent \d+ s before the link ends to pids \d+$",
                     capsys.readouterr().err.strip())


@pytest.mark.parametrize("warn, limit, said", [
    ("USR1@120", 120, "no warning before this link ends: --warn USR1@120 is not shorter than "
                      "the job's time limit (00:02:00)"),
    ("TERM@600", 300, "no warning before this link ends: --warn TERM@600 is not shorter than "
                      "the job's time limit (00:05:00)"),
    ("USR1@60", 61, "the work gets SIGUSR1 60 s before this link ends"),
    ("USR1@60", None, "the work gets SIGUSR1 60 s before this link ends"),
], ids=["as long as the limit", "longer than the limit", "a second shorter",
        "limit not known"])
def test_a_warning_starts_its_timer_only_when_shorter_than_the_time_limit(
        monkeypatch, warn, limit, said):
    started = []
    monkeypatch.setattr(rc.subprocess, "Popen", lambda argv, **_: started.append(argv))
    words = rc.start_warner(warn, int(time.time()) + 60, limit, {"SLURM_TASK_PID": "17"})
    assert words.startswith(said), words
    assert len(started) == (0 if said.startswith("no warning") else 1)


def test_the_timer_of_a_job_whose_work_ended_sends_nothing(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    slept = []
    assert rc.warn_command("USR1@20", str(int(time.time()) + 3600), str(gone.pid),
                           sleep=slept.append) == 0
    assert slept == []


def test_render_puts_the_warning_in_the_prologue(tmp_path):
    text = rc.render_prologue(str(tmp_path / "run"), warn="sigusr1@120")
    assert " --warn=USR1@120 " in text


@pytest.mark.parametrize("argv", [
    ["render", "RUN", "--warn", "KILL@30"],
    ["resume", "RUN", "--warn", "USR1"],
])
def test_a_bad_warning_is_refused_in_one_line(cluster, capsys, monkeypatch, tmp_path, argv):
    argv = [str(tmp_path / "run") if word == "RUN" else word for word in argv]
    status, out, err = run_cli(cluster, capsys, monkeypatch, *argv)
    assert (status, out) == (rc.EXIT_USAGE, "")
    assert len(err.strip().splitlines()) == 1 and "SIG@SECONDS" in err


def test_a_link_exports_its_end_and_starts_the_timer_for_a_lowered_limit(cluster, run_dir):
    script = cluster.write_script(run_dir, max_walltime="5:30", warn="USR1@20",
                                  work='echo "$RESUMABLE_CHAIN_END" >> "$WORKLOG.end"\n')
    now = int(time.time())  # the timer fires at once (its moment passed) and finds no handler
    result = cluster.run_link(script, 100, SLURM_JOB_START_TIME=now - 3600,
                              SLURM_JOB_END_TIME=now - 3000)
    assert result.returncode == 0, result.stderr
    with open(cluster.worklog + ".end") as handle:
        assert handle.read() == "%d\n" % (now - 3600 + 300)  # 10 min limit lowered to 5
    assert "the work gets SIGUSR1 20 s before this link ends at" in result.stderr


def test_resume_gives_its_warning_to_the_resumed_link_and_every_later_one(
        cluster, run_dir, capsys, monkeypatch):
    script, successor = start_chain(cluster, run_dir, max_retries=0, warn="USR1@20")
    cluster.finish(100, "FAILED", 5)
    assert cluster.run_link(script, successor, predecessor=100).returncode == 1
    cluster.finish(successor, "FAILED", 0)
    status, out, err = run_cli(cluster, capsys, monkeypatch, "resume", run_dir, "--warn",
                               "usr2@60")
    assert status == 0, err
    job = out.strip()
    assert json.loads(read(run_dir, rc.JOURNAL_FILE))["warn"] == "USR2@60"
    past = dict(SLURM_JOB_START_TIME=1000, SLURM_JOB_END_TIME=1600)  # the timer ends at once
    result = cluster.run_link(script, job, **past)
    assert "the work gets SIGUSR2 60 s before this link ends" in result.stderr
    later = cluster.pending()[-1]
    cluster.finish(job, "TIMEOUT", 60)
    result = cluster.run_link(script, later, predecessor=job, **past)  # USR1 in its prologue
    assert "the work gets SIGUSR2 60 s before this link ends" in result.stderr


@pytest.mark.parametrize("argv, header", [
    (["render", "RUN", "--warn", "USR1@60", "--", "--time=1"], ""),
    (["render", "RUN", "--warn", "USR1@60", "--max-walltime", "1:30"], ""),  # a 1-minute link
    (["render", "RUN", "--warn", "USR1@300", "--script", "SCRIPT"], "#SBATCH --time=5\n"),
    (["submit", "RUN", "--warn", "USR1@60", "--time=1", "SCRIPT"], ""),
    (["submit", "RUN", "--warn", "USR1@300", "SCRIPT"], "#SBATCH --time=5\n"),
    (["submit", "RUN", "--warn", "USR1@120", "-t", "2", "SCRIPT"], "#SBATCH --time=10\n"),
    (["resume", "RUN", "--warn", "USR1@60", "--time=1"], None),
    (["resume", "RUN", "--warn", "USR1@600", "--max-walltime", "10"], None),
    (["resume", "RUN", "--warn", "USR1@600"], None),  # failed_chain's script: #SBATCH --time=10
], ids=["render --time", "render --max-walltime", "render --script's #SBATCH --time",
        "submit --time", "submit #SBATCH --time", "submit -t over #SBATCH --time", "resume --time",
        "resume --max-walltime", "resume #SBATCH --time"])
def test_a_warning_that_can_never_come_before_the_limit_is_refused_in_one_line(
        cluster, capsys, monkeypatch, tmp_path, argv, header):
    run_dir, script = str(tmp_path / "run"), str(tmp_path / "train.sbatch")
    with open(script, "w") as handle:
        handle.write("#!/bin/bash\n%strue\n" % header)
    if header is None:  # resume: a chain that failed
        failed_chain(cluster, run_dir)
    before = sorted(os.listdir(str(tmp_path))), cluster.load()["jobs"]
    argv = [{"RUN": run_dir, "SCRIPT": script}.get(word, word) for word in argv]
    status, out, err = run_cli(cluster, capsys, monkeypatch, *argv)
    assert (status, out) == (rc.EXIT_USAGE, ""), err
    assert len(err.strip().splitlines()) == 1, err
    assert "can never come before a link ends: " in err and "give it fewer seconds" in err
    assert (sorted(os.listdir(str(tmp_path))), cluster.load()["jobs"]) == before
    argv[argv.index("--warn") + 1] = "USR1@59"  # a second under a minute comes before it
    assert run_cli(cluster, capsys, monkeypatch, *argv)[0] == 0


@pytest.mark.parametrize("options, warned", [
    (["--warn", "USR1@20", "--time=1"], "--warn USR1@20 comes 40 s into a link"),
    (["--warn", "USR1@20", "--max-walltime", "1:30"], "--warn USR1@20 comes 40 s into a link"),
    (["--warn", "USR1@20", "--time=2"], None),
    (["--warn", "USR1@20"], None),  # the partition's default time: not known here
], ids=["a 1-minute link", "a cap of a minute and a half", "a 2-minute link", "no --time"])
@pytest.mark.parametrize("command", ["submit", "render"])
def test_submit_and_render_warn_when_the_warning_comes_in_a_links_first_minute(
        cluster, capsys, monkeypatch, tmp_path, options, warned, command):
    script = str(tmp_path / "train.sbatch")
    with open(script, "w") as handle:
        handle.write("#!/bin/bash\ntrue\n")
    ours = [word for word in options if not word.startswith("--time")]  # render: sbatch's after --
    status, out, err = run_cli(cluster, capsys, monkeypatch, command, str(tmp_path / "run"), *(
        options + [script] if command == "submit" else ours + ["--"] + options[len(ours):]))
    assert status == 0, err
    assert (err.count("counts a retry when the link before did so too") == 1) is bool(warned)
    assert warned is None or warned in err


def test_status_tells_a_warned_exit_75_from_accounting_as_not_counted(
        cluster, run_dir, capsys, monkeypatch):
    """sacct (the controller has forgotten the job) gives its time limit too (Timelimit)."""
    script, successor = start_chain(cluster, run_dir, warn="USR1@20")
    cluster.set_job("100", state="FAILED", elapsed=45, exit_code="75:0", time_limit="1",
                    end="2026-11-30T02:00:00", in_controller=False)
    result = cluster.run_link(script, successor, predecessor=100)
    assert "not counted as a retry" in result.stderr, result.stderr
    status, out, err = run_cli(cluster, capsys, monkeypatch, "status", run_dir, "--json")
    rows = {row["job"]: row for row in json.loads(out)["jobs"]}
    assert rows["100"]["note"] == ("exit 75: after the --warn signal: no retry counted unless "
                                   "the link before it ended so too"), rows["100"]


@pytest.mark.parametrize("elapsed,warn,words", [
    (45, "USR1@30", "exit 75: after the --warn signal: no retry counted unless the link before "
     "it ended so too"),
    (20, "USR1@30", "exit 75: no progress (under a minute): counted as a retry"),
    (45, None, "exit 75: no progress (under a minute): counted as a retry"),
], ids=["warned", "before the warning", "no warning asked"])
def test_status_says_a_quick_exit_75_after_the_warning_was_not_counted(elapsed, warn, words):
    job = rc.Job("7", "FAILED", elapsed, time_limit=60, exit_code="75:0")
    assert rc._how_link_ended(job, rc.Record(job="8", action="resume", warn=warn)) == words
