"""Benchmark resumable_chain's prologue against the seed's reference prologue, side by side.

    python3 bench/run.py            # full run (under 5 minutes), writes docs/performance.md
    python3 bench/run.py --smoke    # about 30 seconds, for CI; writes nothing
    python3 bench/run.py --real     # adds every local cluster of ci/local-slurm.sh's table:
                                    # time to work beside the bash prologue and the limit
                                    # (each under /tmp/slurm-cluster.lock), link-to-link
                                    # latency and status on the default one

Timings are medians of repeated runs and are reported as ratios measured in the same run.
For the timed links the Slurm commands are one tiny sh script that replays what the tests'
fake Slurm (tests/fake_slurm.py, itself checked against real recorded outputs) prints for a
predecessor that timed out: a Python process per call would cost ~20 ms and swamp the ratios.
It answers at once, or L seconds late for the lag figures, and counts every call. The in-process
scale figures use tests/fake_slurm.py itself. Standard library only.
"""
import argparse
import contextlib
import fcntl
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import fake_slurm  # noqa: E402
import resumable_chain as rc  # noqa: E402

BASELINE = os.path.join(HERE, "baseline_prologue.sh")
BASH = shutil.which("bash") or "/bin/bash"

PLACEHOLDER = "4000000001"  # the predecessor's ID in the replayed output
REPLAY = r"""#!/bin/sh
command=$(basename "$0")
echo "$command" >> "$BENCH_CALLS"
case "$command" in
sbatch) echo "$BENCH_NEXT_ID" ;;
squeue) ;;
scancel) ;;
scontrol)
    if [ "$1" = update ]; then
        exit 0  # as Slurm: silent success (Requeue=0, TimeLimit=...)
    elif [ "$1" = show ] && [ "${BENCH_CONTROLLER_KNOWS:-0}" = 1 ]; then
        printf '%s' "__SCONTROL__"
    else
        printf '%s' "__FORGOTTEN__" >&2; exit 1
    fi ;;
sacct)
    if [ -n "${BENCH_VISIBLE_AT:-}" ]; then
        now=$(date +%s.%N)
        awk "BEGIN { exit !($now < $BENCH_VISIBLE_AT) }" && exit 0
    fi
    while [ $# -gt 0 ]; do
        [ "$1" = -o ] && fields=$2
        shift
    done
    case "$fields" in
__SACCT__
    esac ;;
esac
"""


def replay_script():
    """The sh fake: what tests/fake_slurm.py prints for a predecessor that TIMEOUT after 73 s."""
    def quoted(text):  # inside "...", the predecessor's ID expanded by sh
        for char in '\\"$`':
            text = text.replace(char, "\\" + char)
        return text.replace(PLACEHOLDER, "${BENCH_PREDECESSOR}")

    cluster = {"jobs": {PLACEHOLDER: {
        "state": "TIMEOUT", "elapsed": 73, "start": "2026-11-30T00:00:00", "time_limit": 1,
        "end": "2026-11-30T00:01:13", "submit": "2026-11-30T00:00:00"}}}
    scontrol = fake_slurm.scontrol(["show", "job", "-o", PLACEHOLDER], cluster, 0)[1]
    forgotten = fake_slurm.scontrol(["show", "job", "-o", "1"], cluster, 0)[2]
    cases = []
    for fields in (rc.SACCT_FIELDS, "State", "ElapsedRaw"):  # ours, then the baseline's two
        line = fake_slurm.sacct(["-j", PLACEHOLDER, "-X", "-D", "-P", "-n", "-o", fields],
                                cluster, 0)[1]
        cases.append('    %s) printf \'%%s\' "%s" ;;' % (fields, quoted(line)))
    return (REPLAY.replace("__SCONTROL__", quoted(scontrol))
            .replace("__FORGOTTEN__", quoted(forgotten)).replace("__SACCT__", "\n".join(cases)))


LAGS = (0, 1, 3, 8, 20)  # seconds the predecessor's record appears late in sacct


class Harness(object):
    """Runs one link at a time, ours or the baseline, with the fakes first on PATH."""

    def __init__(self, root):
        self.root = root
        self.bin = os.path.join(root, "fakes")
        os.makedirs(self.bin)
        replay = replay_script()
        for command in ("sacct", "sbatch", "scontrol", "squeue", "scancel"):
            path = os.path.join(self.bin, command)
            with open(path, "w") as handle:
                handle.write(replay)
            os.chmod(path, 0o755)
        self.calls = os.path.join(root, "calls")
        self.work_at = os.path.join(root, "work-at")
        self.next_job = {"ours": 100, "baseline": 500000}  # two chains: job IDs apart
        self.last = {}
        self.scripts = {"ours": self._script("ours"), "baseline": self._script("baseline")}
        for kind in self.scripts:  # each chain starts with a first job
            self.link(kind, first=True)

    def _script(self, kind):
        run_dir = os.path.join(self.root, "run-" + kind)
        if kind == "ours":
            prologue = rc.render_prologue(run_dir, python=sys.executable)
        else:
            prologue = ('status=0; %s %s %s 3 || status=$?\n[ "$status" -eq 3 ] && exit 0\n'
                        '[ "$status" -ne 0 ] && exit "$status"\n'
                        % (BASH, BASELINE, rc.shell_quote(run_dir)))
        path = os.path.join(self.root, kind + ".sh")
        with open(path, "w") as handle:
            handle.write("#!/bin/bash\n" + prologue + WORK)
        return path

    def link(self, kind, lag=None, controller_knows=False, first=False, **extra):
        """Run one link; return (seconds from start to work, {command: calls}). The link's
        background step (ours) ends before the next link starts, as it does between real links;
        its Slurm calls are counted with the link's."""
        job, predecessor = self.next_job[kind], self.last.get(kind)
        self.next_job[kind] += 1
        self.last[kind] = job
        if os.path.exists(self.calls):
            os.unlink(self.calls)
        environ = {"PATH": self.bin + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
                   "HOME": os.environ.get("HOME", "/"), "SLURM_JOB_ID": str(job),
                   "SLURM_JOB_NAME": "bench", "SLURM_JOB_DEPENDENCY": "afternotok:%s" % predecessor,
                   "BENCH_CALLS": self.calls, "BENCH_NEXT_ID": str(job + 1),
                   "BENCH_PREDECESSOR": str(predecessor),
                   "BENCH_CONTROLLER_KNOWS": "1" if controller_knows else "0",
                   "BENCH_WORK_AT": self.work_at}
        environ.update(extra)
        if first:
            del environ["SLURM_JOB_DEPENDENCY"]
        started = time.time()
        if lag is not None:
            environ["BENCH_VISIBLE_AT"] = "%.3f" % (started + lag)
        result = subprocess.run([BASH, self.scripts[kind]], env=environ, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, universal_newlines=True)
        elapsed = work_started(self.work_at) - started
        if result.returncode != 0:
            raise SystemExit("%s link failed: %s" % (kind, result.stderr.strip()))
        counts = {}
        if os.path.exists(self.calls):
            with open(self.calls) as handle:
                for line in handle:
                    counts[line.strip()] = counts.get(line.strip(), 0) + 1
        return elapsed, counts


# The work: it notes when it started (bash's clock, no process): a background step the prologue
# left running (it holds stderr until its first part is done) is not time to work.
WORK = 'echo "$EPOCHREALTIME" > "$BENCH_WORK_AT"\nexit 0\n'


def work_started(path):
    with open(path) as handle:
        return float(handle.read().strip().replace(",", "."))


LOADED_ONLY = rc.BOOTSTRAP.replace("m.main(sys.argv[1:])", "0")
assert LOADED_ONLY != rc.BOOTSTRAP, "the bootstrap no longer ends with main()"


def bare_start(code, *arguments):
    started = time.time()
    subprocess.run([sys.executable, "-I", "-S", "-c", code] + list(arguments))
    return time.time() - started


def median_of(function, repeats):
    return statistics.median(function() for _ in range(repeats))


def time_to_work(harness, repeats):
    """Median seconds to the work of a resumed link (predecessor just ended), side by side."""
    samples = {"ours": [], "baseline": [], "module loaded": [], "bare -I -S": []}
    for _ in range(repeats):  # interleaved, so drift hits all alike
        samples["ours"].append(harness.link("ours", controller_knows=True)[0])
        samples["baseline"].append(harness.link("baseline")[0])
        samples["module loaded"].append(bare_start(LOADED_ONLY, rc.module_path()))
        samples["bare -I -S"].append(bare_start("pass"))
    return {kind: statistics.median(values) for kind, values in samples.items()}


def lag_reaction(harness, lags, repeats):
    """Extra seconds beyond the lag L before the work starts; ours and the baseline."""
    rows = []
    for lag in lags:
        count = repeats if lag <= 3 else 1
        ours = [harness.link("ours", lag=lag) for _ in range(count)]
        baseline = [harness.link("baseline", lag=lag) for _ in range(count)]
        rows.append((lag, statistics.median(t for t, _ in ours) - lag,
                     statistics.median(t for t, _ in baseline) - lag,
                     max(c.get("sacct", 0) for _, c in ours),
                     max(c.get("sacct", 0) for _, c in baseline)))
    known = [harness.link("ours", lag=20, controller_knows=True)[0] for _ in range(repeats)]
    return rows, statistics.median(known)


def controller_load(harness):
    common_ours = harness.link("ours", controller_knows=True)[1]
    common_baseline = harness.link("baseline")[1]
    return common_ours, common_baseline


def scale(root, sizes, repeats, directories):
    """Median in-job step time (in-process, tests/fake_slurm.py) by chain length and by dirs."""
    real_run_slurm = rc.run_slurm
    script = os.path.join(root, "successor.sh")
    with open(script, "w") as handle:
        handle.write("#!/bin/bash\ntrue\n")
    spec = rc.NextLink(script, [], [], "bench")

    def prepare(run_dir, lines):
        os.makedirs(run_dir)
        with open(os.path.join(run_dir, rc.CHAIN_FILE), "w") as handle:
            handle.write("".join("%d\n" % (10 ** 6 + i) for i in range(lines - 1)))
            handle.write("1\n")
        return [1]

    def step(run_dir, last):
        job, cluster = last[0] + 1, run_dir + ".cluster.json"
        fake_slurm.save(cluster, {"next_id": job + 1, "jobs": {str(last[0]): {  # just ended
            "state": "TIMEOUT", "elapsed": 73, "start": "2026-11-30T00:00:00"}}})
        rc.run_slurm = fake_slurm.InProcess(cluster)
        started = time.perf_counter()
        rc.run_link(run_dir, rc.Settings(3, None), spec, {
            "SLURM_JOB_ID": str(job), "SLURM_JOB_DEPENDENCY": "afternotok:%d" % last[0]})
        last[0] = job
        return time.perf_counter() - started

    try:
        dirs = {size: os.path.join(root, "chain-%d" % size) for size in sizes}
        last = {size: prepare(dirs[size], size) for size in sizes}
        samples = {size: [] for size in sizes}
        stderr, sys.stderr = sys.stderr, open(os.devnull, "w")
        try:
            for _ in range(repeats):
                for size in sizes:  # interleaved
                    samples[size].append(step(dirs[size], last[size]))
            many = [os.path.join(root, "many", "d%04d" % i) for i in range(directories)]
            many_last = [prepare(path, 10) for path in many]
            many_times = [step(path, state) for path, state in zip(many, many_last)]
        finally:
            sys.stderr.close()
            sys.stderr = stderr
        return ({size: statistics.median(values) for size, values in samples.items()},
                statistics.median(many_times))
    finally:
        rc.run_slurm = real_run_slurm


def sbatch(*options, environ=None):
    """Submit a job to a local cluster (``environ``: the one its release's env selects)."""
    return subprocess.run(["sbatch", "--parsable", "-o", "/dev/null"] + list(options),
                          check=True, stdout=subprocess.PIPE, env=environ,
                          universal_newlines=True).stdout.strip().split(";")[0]


CLUSTER_LOCK = "/tmp/slurm-cluster.lock"  # the local clusters are shared: one user at a time


@contextlib.contextmanager
def cluster_lock():
    with open(CLUSTER_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # as flock(1): the same lock
        yield


def releases():
    """{release: the environment that selects it} for each row of ci/local-slurm.sh's table."""
    script = os.path.join(ROOT, "ci", "local-slurm.sh")
    table = subprocess.run(["bash", script, "table"], check=True, stdout=subprocess.PIPE,
                           universal_newlines=True).stdout
    found = {}
    for release in (line.split()[0] for line in table.splitlines() if line[:1].isdigit()):
        lines = subprocess.run(["bash", script, "--release", release, "env"], check=True,
                               stdout=subprocess.PIPE, universal_newlines=True).stdout
        environ = dict(os.environ)
        for name, _, value in (line[len("export "):].partition("=")
                               for line in lines.splitlines() if line.startswith("export ")):
            environ[name] = value.replace("$PATH", os.environ.get("PATH", ""))
        found[release] = environ
    return found


# The limit of a link: the prologue's interpreter with the module loaded, then one sbatch of a
# held job through the module's one seam, nothing else: what a link must do before its work.
LIMIT = rc.BOOTSTRAP.replace("m.main(sys.argv[1:])", "m.run_slurm(['sbatch', '--parsable', "
                            "'--hold', '--job-name=rc-bench-limit', '--output=/dev/null', "
                            "'--wrap', 'true']).returncode")


def wait_for_background(run_dir, seconds=10):
    """Until ours' background step journaled the successor's guard: the next sample then runs
    alone, as links do (the step holds no pipe: output goes to a file, as a job's)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        record = rc.StateStore(run_dir).read_record()
        if record and (record.guard or record.guard_error):
            return
        time.sleep(0.01)


def held_link(environ):
    """(a predecessor that just FAILED, "this job": a held job, the guard it has: held too)."""
    predecessor = sbatch("-J", "rc-bench-pred", "--wrap", "exit 3", environ=environ)
    holder = sbatch("-J", "rc-bench-holder", "--hold", "--wrap", "true", environ=environ)
    guard = sbatch("-J", "rc-bench-guard", "--hold", "--wrap", "true", environ=environ)
    deadline = time.time() + 60
    while "JobState=FAILED" not in subprocess.run(
            ["scontrol", "show", "job", "-o", predecessor], stdout=subprocess.PIPE,
            env=environ, universal_newlines=True).stdout:
        if time.time() > deadline:
            raise SystemExit("the predecessor job %s did not fail within 60 s" % predecessor)
        time.sleep(0.5)
    return predecessor, holder, guard


def chain_before(run_dir, predecessor, holder, guard):
    """``run_dir`` made, its chain's last link the predecessor, which queued this job and its
    guard: the common case."""
    os.makedirs(run_dir)
    store = rc.StateStore(run_dir)
    store.write_text(rc.CHAIN_FILE, predecessor + "\n")
    store.write_record(rc.Record(job=predecessor, action="start", walltime=0, retries=0,
                                 max_retries=3, link=1, successor=holder, guard=guard,
                                 phase="queued"))
    return run_dir


def real_time_to_work(repeats, environ=None):
    """On a local cluster: a resumed link's time to work, ours, the baseline and the limit side
    by side (interleaved), output to a file as a job's.

    The predecessor is a real job that just FAILED (the controller still holds it); "this job"
    is a real held job, so the successors both prologues queue stay pending, and are cancelled.
    """
    environ = dict(environ or os.environ)
    root = tempfile.mkdtemp(prefix="rc-bench-ttw-")
    predecessor, holder, guard = held_link(environ)
    scripts = {"ours": rc.render_prologue(os.path.join(root, "run"), python=sys.executable).replace(
        rc.shell_quote(os.path.join(root, "run")), '"$RUN_DIR"'),
        "limit": " ".join(rc.shell_quote(word) for word in (
            sys.executable, "-I", "-S", "-c", LIMIT, rc.module_path())) + " >/dev/null\n"}
    for kind, prologue in scripts.items():
        scripts[kind] = os.path.join(root, kind + ".sh")
        with open(scripts[kind], "w") as handle:
            handle.write("#!/bin/bash\n" + prologue + WORK)
    environ.update(SLURM_JOB_ID=holder, SLURM_JOB_NAME="rc-bench-succ",
                   SLURM_JOB_DEPENDENCY="afternotok:%s" % predecessor,
                   BENCH_WORK_AT=os.path.join(root, "work-at"))
    samples = {"ours": [], "baseline": [], "limit": []}
    try:
        with open(os.path.join(root, "job.log"), "w") as log:
            for number in range(repeats):
                run_dir = chain_before(os.path.join(root, "run%d" % number), predecessor,
                                       holder, guard)
                for kind, argv in (("ours", [BASH, scripts["ours"]]),
                                   ("baseline", [BASH, BASELINE, run_dir + "-baseline", "3"]),
                                   ("limit", [BASH, scripts["limit"]])):
                    started = time.time()
                    result = subprocess.run(argv, env=dict(environ, RUN_DIR=run_dir),
                                            stdout=log, stderr=log)
                    ended = work_started(environ["BENCH_WORK_AT"]) if kind != "baseline" \
                        else time.time()
                    samples[kind].append(ended - started)
                    if result.returncode != 0:
                        raise SystemExit("%s failed on the cluster (see %s)" % (kind, log.name))
                    if kind == "ours":
                        wait_for_background(run_dir)
    finally:
        for name in (rc.GUARD_PREFIX + "rc-bench-succ", "rc-bench-succ", "baseline_prologue.sh",
                     "rc-bench-holder", "rc-bench-guard", "rc-bench-limit", "rc-bench-pred"):
            subprocess.run(["scancel", "--name", name], stderr=subprocess.DEVNULL, env=environ)
        shutil.rmtree(root, ignore_errors=True)
    return {kind: statistics.median(values) for kind, values in samples.items()}


def real_collection_status(chains, repeats):
    """On the local cluster: ``status PARENT`` over ``chains`` chains (each: a link that FAILED,
    then a live link with a pending successor, all real jobs), beside one ``status DIR`` per
    chain, the way a collection was watched before. Returns (one table, one per chain) medians."""
    root = tempfile.mkdtemp(prefix="rc-bench-many-")
    ended = sbatch("-J", "rc-bench-many", "--wrap", "exit 3")
    cluster = rc.current_cluster()
    try:
        run_dirs = []
        for number in range(chains):
            link, successor = (sbatch("-J", "rc-bench-many", "--hold", "--wrap", "true")
                               for _ in range(2))
            run_dir = os.path.join(root, "chain%02d" % number)
            os.makedirs(run_dir)
            store = rc.StateStore(run_dir)
            store.write_text(rc.CHAIN_FILE, "%s\n%s\n" % (ended, link))
            store.write_text(rc.WALLTIME_FILE, "60\n")
            store.write_text(rc.RETRIES_FILE, "1\n")
            store.write_record(rc.Record(job=link, predecessor=ended, predecessor_state="FAILED",
                                         action="resume", walltime=60, retries=1, max_retries=3,
                                         link=2, successor=successor, phase="queued",
                                         cluster=cluster))
            run_dirs.append(run_dir)
        command = [sys.executable, "-I", "-S", os.path.join(ROOT, "resumable_chain.py"), "status"]

        def timed(argvs):
            started = time.time()
            for argv in argvs:
                result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        universal_newlines=True)
                if result.returncode != 0 or "waiting" not in result.stdout:
                    raise SystemExit("status failed on the cluster: %s%s"
                                     % (result.stdout, result.stderr))
            return time.time() - started

        table = statistics.median(timed([command + [root]]) for _ in range(repeats))
        each = statistics.median(timed([command + [run_dir] for run_dir in run_dirs])
                                 for _ in range(max(repeats // 2, 1)))
    finally:
        subprocess.run(["scancel", "--name", "rc-bench-many"], stderr=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)
    return table, each


def real_latency(links):
    """On the local cluster: seconds from a link's end (sacct End) to its successor's work."""
    root = tempfile.mkdtemp(prefix="rc-bench-real-")
    worklog = os.path.join(root, "work.log")
    script = os.path.join(root, "job.sh")
    with open(script, "w") as handle:
        handle.write("#!/bin/bash\n#SBATCH --job-name=rc-bench-real\n#SBATCH --output=%s/%%j.out\n"
                     "#SBATCH -c 1\n" % root)
        handle.write(rc.render_prologue(os.path.join(root, "run"), max_retries=links,
                                        python=sys.executable))
        handle.write('echo "$SLURM_JOB_ID $(date +%%s.%%N)" >> %s\n'
                     'n=$(wc -l < %s); [ "$n" -ge %d ] && exit 0; exit 3\n'
                     % (worklog, worklog, links + 1))
    subprocess.run(["sbatch", "--parsable", script], check=True, stdout=subprocess.PIPE)
    deadline = time.time() + 600
    while time.time() < deadline:
        if os.path.exists(worklog) and sum(1 for _ in open(worklog)) >= links + 1:
            break
        time.sleep(1)
    time.sleep(3)
    starts = [line.split() for line in open(worklog)]
    gaps = []
    for (job, _), (_, next_start) in zip(starts, starts[1:]):
        end = subprocess.run(["sacct", "-j", job, "-X", "-n", "-P", "-o", "End"],
                             stdout=subprocess.PIPE, universal_newlines=True).stdout.split()[0]
        end_epoch = time.mktime(time.strptime(end, "%Y-%m-%dT%H:%M:%S"))
        gaps.append(float(next_start) - end_epoch)
    return statistics.median(gaps), len(gaps)


# docs/performance.md: the targets and decisions (written by hand) above this line, the latest
# run's figures (written by this script) below it.
MARKER = "<!-- bench/run.py writes everything below this line -->"


def kept_above_marker(path):
    """The hand-written text of ``path`` up to its MARKER line, with the marker ('' if none)."""
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        return ""
    head, found, _ = text.partition(MARKER)
    return head + MARKER + "\n\n" if found else ""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a 30-second version for CI")
    parser.add_argument("--real", action="store_true", help="also measure on the local cluster")
    parser.add_argument("--output", default=os.path.join(ROOT, "docs", "performance.md"),
                        help="the report's file: what it holds above %s is kept" % MARKER)
    options = parser.parse_args(argv)
    started = time.time()
    root = tempfile.mkdtemp(prefix="rc-bench-")
    harness = Harness(root)
    repeats = 5 if options.smoke else 21
    lines = ["## The latest run", "",
             "Command: `python3 bench/run.py%s`; machine: %s, %s, %d CPUs, Python %s; %s." % (
                 "".join(" " + arg for arg in (argv if argv is not None else sys.argv[1:])),
                 platform.platform(), platform.processor()
                 or platform.machine(), os.cpu_count() or 0, platform.python_version(),
                 time.strftime("%Y-%m-%d")), ""]

    work = time_to_work(harness, repeats)
    lines += ["### 1. Time to work of a resumed link (instant fake Slurm, predecessor just ended)",
              "", "| | median | ratio to the baseline (seed-style bash prologue) |",
              "| --- | --- | --- |"]
    for kind in ("ours", "baseline", "module loaded", "bare -I -S"):
        lines.append("| %s | %.1f ms | %.2fx |" % (kind, work[kind] * 1000,
                                                   work[kind] / work["baseline"]))
    lines += ["", "`bare -I -S` is `python -I -S -c pass`, the floor of any isolated Python "
              "prologue; `module loaded` is the prologue's interpreter with the module's standard "
              "library imports (json, subprocess, ...) and the module loaded, doing nothing: the "
              "floor of this module without private modules. Before its work ours adds two Slurm "
              "commands (the predecessor's lookup, which the prologue's shell starts as "
              "Python starts, and the successor's sbatch) and starts its background step, "
              "which queues the successor's guard and cancels the link's own while the work runs. "
              "Target: ours at most 2.0x the baseline.", ""]

    lags = (0, 1) if options.smoke else LAGS
    lag_rows, known = lag_reaction(harness, lags, 1 if options.smoke else 3)
    lines += ["### 2. Reaction to accounting lag (controller has forgotten the job)", "",
              "| lag L | ours: extra beyond L | baseline: extra beyond L | ours: sacct calls | "
              "baseline: sacct calls |", "| --- | --- | --- | --- | --- |"]
    for lag, ours_extra, base_extra, ours_calls, base_calls in lag_rows:
        lines.append("| %d s | %.2f s | %.2f s | %d | %d |" % (lag, ours_extra, base_extra,
                                                               ours_calls, base_calls))
    lines += ["", "With the controller still knowing the job (scontrol), L = 20 s: ours reacts "
              "in %.2f s in total." % known, "",
              "Target: at most 1 s beyond L; under 1 s in total when scontrol knows the job.", ""]

    ours_load, base_load = controller_load(harness)
    lines += ["### 3. Slurm commands per link", "",
              "| case | ours | baseline |", "| --- | --- | --- |",
              "| common (predecessor just ended) | %s | %s |" % (
                  ", ".join("%s %d" % item for item in sorted(ours_load.items())),
                  ", ".join("%s %d" % item for item in sorted(base_load.items()))),
              "| lag of %d s, controller forgot the job | sacct %d | sacct %d |" % (
                  lag_rows[-1][0], lag_rows[-1][3], lag_rows[-1][4]), "",
              "Target: no sacct and one sbatch in the common case; at most 12 sacct in the "
              "window.", ""]

    sizes = (1, 10000) if options.smoke else (1, 10000, 1000000)
    by_size, many = scale(root, sizes, 5 if options.smoke else 31, 50 if options.smoke else 1000)
    lines += ["### 4. Scale (in-job step in-process, instant fake Slurm)", "",
              "| chain file | median step | ratio to 1 line |", "| --- | --- | --- |"]
    for size in sizes:
        lines.append("| %d lines | %.2f ms | %.2fx |" % (size, by_size[size] * 1000,
                                                        by_size[size] / by_size[1]))
    lines += ["| %d chains' directories, one link each | %.2f ms | %.2fx |" % (
        50 if options.smoke else 1000, many * 1000, many / by_size[1]), "",
        "Target: 1,000,000 lines within 1.1x of 1 line.", ""]

    if options.real:
        lines += ["### 5. Time to work on the real local clusters (predecessor just ended)", "",
                  "| release | bash prologue | ours | ratio | limit: the module loaded + one "
                  "sbatch | ours to the limit |", "| --- | --- | --- | --- | --- | --- |"]
        for release, environ in releases().items():  # one run each, the clusters side by side
            with cluster_lock():
                real = real_time_to_work(5 if options.smoke else 21, environ)
            lines.append("| %s | %.1f ms | %.1f ms | %.2fx | %.1f ms | %.2fx |" % (
                release, real["baseline"] * 1000, real["ours"] * 1000,
                real["ours"] / real["baseline"], real["limit"] * 1000,
                real["ours"] / real["limit"]))
        with cluster_lock():
            latency, count = real_latency(10)
        lines += ["", "A link its predecessor queued and guarded, the common case, each "
                  "release's commands and SLURM_CONF; the three interleaved, output to a file "
                  "as a job's. The limit is what a link must do before its work: Python's "
                  "start, the module's load and one sbatch (of a held job) through the "
                  "module's seam. Targets: ours faster than the bash prologue on every "
                  "release, and at most 1.5x the limit.", "",
                  "### 6. Real cluster", "",
                  "Median seconds from a link's end (sacct End, whole seconds) to its successor's "
                  "work start over %d links: %.2f s. Target: under 3 s." % (count, latency), ""]
        chains = 10 if options.smoke else 50
        with cluster_lock():
            table, each = real_collection_status(chains, 3 if options.smoke else 7)
        lines += ["### 7. Status of a collection on the real local cluster", "",
                  "| %d chains (real jobs: an ended link, a held link, a pending successor) | "
                  "seconds | ratio to one status per chain |" % chains, "| --- | --- | --- |",
                  "| `status PARENT` (one table) | %.2f s | %.2fx |" % (table, table / each),
                  "| `status DIR` for each chain | %.2f s | 1.00x |" % each, "",
                  "Target: 50 chains in under 2 s.", ""]
    shutil.rmtree(root, ignore_errors=True)
    lines.append("Run took %.0f s." % (time.time() - started))
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if not options.smoke:
        kept = kept_above_marker(options.output)  # read before open() truncates the file
        with open(options.output, "w") as handle:
            handle.write(kept + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
