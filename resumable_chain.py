# Copyright 2026 The resumable_chain authors
# SPDX-License-Identifier: Apache-2.0
#
# Licensed under the Apache License, Version 2.0 (the "License"); you may not
# use this file except in compliance with the License. You may obtain a copy
# at http://www.apache.org/licenses/LICENSE-2.0. Distributed on an "AS IS"
# BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND.
"""Make a Slurm batch job a self-chaining, resumable sequence.

When a link of the chain runs out of walltime, is preempted or loses its
node, the next link starts and the run continues from what was already
collected. Each job's prologue looks up its predecessor's final state with
sacct, decides (start, resume, complete, stop, fail), keeps the chain's state
in dot-files of the run directory, and queues its own successor with
``sbatch --dependency=afternotok:<this job> --kill-on-invalid-dep=yes``
before any work starts.

Use it three ways:

* vendored: ``render_prologue(run_dir, max_walltime="48:00:00")`` returns the
  bash snippet to put after a job script's ``#SBATCH`` lines; ``decide()`` is
  the pure decision table; ``parse_resumable()`` validates a driver's
  ``resumable:`` setting;
* as a command: ``python3 resumable_chain.py render RUN_DIR`` prints the
  snippet, ``status`` and ``cancel`` operate a chain, ``submit`` makes any
  batch script resumable;
* copied onto a cluster with nothing but Python 3.6+ and the Slurm commands.
"""

import argparse
import calendar
import collections
import collections.abc
import contextlib
import copy
import errno
import fcntl
import json
import os
import pwd
import re
import shlex
import signal
import subprocess
import sys
import time

__version__ = "0.1.0"
__all__ = [
    "NOT_VISIBLE",
    "ACTIONS",
    "Decision",
    "Settings",
    "StateError",
    "decide",
    "parse_walltime",
    "parse_resumable",
    "resumable_run_overrides",
    "render_prologue",
    "main",
]

# ---------------------------------------------------------------------------
# Constants and tables
# ---------------------------------------------------------------------------

NOT_VISIBLE = "NOT_VISIBLE"  # the predecessor could not be found in sacct or scontrol
ACTIONS = ("start", "resume", "complete", "stop", "fail")  # every action decide() returns
DEFAULT_MAX_RETRIES = 3  # non-timeout failures retried before the chain fails

CHAIN_FILE = ".gym_job_chain"  # one job ID per line: every job that ran its work
WALLTIME_FILE = ".gym_accumulated_walltime"  # integer seconds used by finished jobs
RETRIES_FILE = ".gym_infra_retries"  # integer count of non-timeout retries
JOURNAL_FILE = ".resumable_chain.json"  # last transaction: crash recovery, links, verdict
LOCK_FILE = ".resumable_chain.lock"  # serializes every writer of one run directory

LOOKUP_SECONDS_ENV = "RESUMABLE_CHAIN_LOOKUP_SECONDS"  # accounting-lag window override
DEFAULT_LOOKUP_SECONDS = 60  # how long a missing predecessor is looked for
LOOKUP_BACKOFF = (0.5, 1, 1.5, 2, 3, 4, 6, 8, 10, 12)  # pauses between sacct tries
COMMAND_TIMEOUT_ENV = "RESUMABLE_CHAIN_COMMAND_TIMEOUT"  # per-command timeout override
DEFAULT_COMMAND_TIMEOUT = 60  # seconds one Slurm command may take before it is killed
LOCK_WAIT_SECONDS = 300  # a lock held longer than this means a stuck writer
MAX_COUNTER = 10 ** 12  # larger counter values are corruption, not history
MIN_TIME_LIMIT = 60  # Slurm's smallest time limit: a link needs at least this much budget

EXIT_WORK = 0  # in-job step: run the work
EXIT_FAIL = 1  # in-job step: max_retries exceeded; the job fails without work
EXIT_USAGE = 2  # bad input, corrupt state, refused operation
EXIT_DONE = 3  # in-job step: chain finished (complete or stop); the job exits 0

# What a predecessor's base state means for its successor.
STATE_MEANING = {
    "COMPLETED": "complete",  # the work finished
    "CANCELLED": "stop",  # a person (or Slurm, for an invalid dependency) cancelled it
    "TIMEOUT": "infra",  # walltime ran out: free resume, capped by max_walltime
    "PREEMPTED": "infra",
    "NODE_FAIL": "infra",
    "PENDING": "lag",  # not final: accounting has not caught up with the end yet
    "RUNNING": "lag",
    "SUSPENDED": "lag",
    "COMPLETING": "lag",
    "CONFIGURING": "lag",
    "REQUEUED": "lag",
    "REQUEUE_FED": "lag",
    "REQUEUE_HOLD": "lag",
    "RESIZING": "lag",
    "SIGNALING": "lag",
    "STAGE_OUT": "lag",
    "STOPPED": "lag",
    "SPECIAL_EXIT": "lag",
    "RESV_DEL_HOLD": "lag",
}  # every other state (FAILED, OUT_OF_MEMORY, BOOT_FAIL, unknown ...) costs a retry

# Options that would break the chain if a user passed them to every successor.
REFUSED_SBATCH_OPTIONS = {
    "-d": "the chain sets the dependency itself",
    "--dependency": "the chain sets the dependency itself",
    "-a": "array jobs cannot be chained (each task would queue a successor)",
    "--array": "array jobs cannot be chained (each task would queue a successor)",
    "--wrap": "the successor is submitted with the job script",
}

# Variables that change sacct/squeue output formats; dropped for every query.
FORMAT_VARIABLES = ("SLURM_TIME_FORMAT", "SACCT_FORMAT", "SQUEUE_FORMAT", "SQUEUE_FORMAT2",
                    "SQUEUE_SORT", "SACCT_FEDERATION", "SACCT_LOCAL", "SLURM_CLUSTERS")

JOB_ID_PATTERN = re.compile(r"[1-9][0-9]{0,9}")  # a plain Slurm job ID (federated ones included)
DURATION_PATTERN = re.compile(
    r"(?:(?P<days>[0-9]+)-(?P<dh>[0-9]+)(?::(?P<dm>[0-9]+)(?::(?P<ds>[0-9]+))?)?"
    r"|(?P<a>[0-9]+)(?::(?P<b>[0-9]+)(?::(?P<c>[0-9]+))?)?)"
)  # M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
SACCT_FIELDS = "JobIDRaw,State,ElapsedRaw,Submit,Start,End"  # what sacct is asked for (-P -n)
REQUEUE_GAP_SECONDS = 120  # a record ending this close to the next submit is the same job, requeued
DURATION_FORMS = "M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (e.g. 90, 48:00:00, 2-00)"


class StateError(Exception):
    """An expected failure: bad input, corrupt state, Slurm refusing. One line for the user."""


Decision = collections.namedtuple("Decision", "action retries reason")
Decision.__doc__ = "What a job does: action (one of ACTIONS), updated retries, and why."

Settings = collections.namedtuple("Settings", "max_retries max_walltime")
Settings.__doc__ = "A validated resumable: setting; max_walltime is seconds or None."

# ---------------------------------------------------------------------------
# Config and parsing (pure)
# ---------------------------------------------------------------------------


def parse_walltime(text):
    """Return the seconds of a positive Slurm duration such as "48:00:00" or "0-06".

    A positive int is taken as seconds. Raises ValueError for anything else.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text > 0:
            return text
        raise ValueError("walltime %r must be positive; accepted forms: %s" % (text, DURATION_FORMS))
    seconds = parse_duration(text) if isinstance(text, str) else None
    if not seconds:
        raise ValueError("invalid walltime %r: use a positive %s" % (text, DURATION_FORMS))
    return seconds


def parse_duration(text):
    """Return the seconds of a Slurm duration (zero allowed), or None if it is not one."""
    match = DURATION_PATTERN.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match:
        return None
    parts = match.groupdict()
    if parts["days"] is not None:
        days, hours = int(parts["days"]), int(parts["dh"])
        minutes, seconds = int(parts["dm"] or 0), int(parts["ds"] or 0)
        return ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    fields = [int(parts[name]) for name in ("a", "b", "c") if parts[name] is not None]
    if len(fields) == 1:  # M
        return fields[0] * 60
    if len(fields) == 2:  # M:S
        return fields[0] * 60 + fields[1]
    return (fields[0] * 60 + fields[1]) * 60 + fields[2]  # H:M:S


def format_duration(seconds):
    """Render seconds as Slurm's [D-]HH:MM:SS."""
    days, rest = divmod(int(seconds), 86400)
    text = "%02d:%02d:%02d" % (rest // 3600, rest // 60 % 60, rest % 60)
    return "%d-%s" % (days, text) if days else text


def _check_max_retries(value, name="max_retries"):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("%s must be a whole number >= 0, got %r" % (name, value))
    return value


def _check_max_walltime(value):
    return None if value is None else parse_walltime(value)


def parse_resumable(value):
    """Validate a driver's ``resumable:`` setting; return Settings or None when off.

    ``False``/``None`` turn it off, ``True`` gives the defaults, and a mapping
    may set ``max_retries`` (int >= 0) and ``max_walltime`` (Slurm duration or
    seconds). Raises ValueError naming the key and what is allowed.
    """
    if value is None or value is False:
        return None
    if value is True:
        return Settings(DEFAULT_MAX_RETRIES, None)
    if not isinstance(value, collections.abc.Mapping):
        raise ValueError("resumable must be true, false or a mapping with max_retries "
                         "and max_walltime, got %r" % (value,))
    unknown = sorted(str(key) for key in value if key not in Settings._fields)
    if unknown:
        raise ValueError("resumable: unknown key %s; allowed keys: max_retries, max_walltime"
                         % ", ".join(repr(key) for key in unknown))
    max_retries = _check_max_retries(value.get("max_retries", DEFAULT_MAX_RETRIES),
                                     "resumable.max_retries")
    try:
        max_walltime = _check_max_walltime(value.get("max_walltime"))
    except ValueError as error:
        raise ValueError("resumable.max_walltime: %s" % error)
    return Settings(max_retries, max_walltime)


def resumable_run_overrides(benchmark, executor):
    """Return a copy of a resumable benchmark's ``run`` overrides with resume_from_cache.

    ``benchmark`` is the benchmark's settings mapping (with ``resumable`` and
    ``run``); ``resume_from_cache: true`` is added unless the user set it.
    Raises ValueError when the executor is not Slurm or the benchmark uses a
    ``command`` (resuming relies on the eval cache). The input is not changed.
    """
    if not isinstance(benchmark, collections.abc.Mapping):
        raise ValueError("benchmark settings must be a mapping, got %r" % (benchmark,))
    run = benchmark.get("run") or {}
    if not isinstance(run, collections.abc.Mapping):
        raise ValueError("benchmark run must be a mapping, got %r" % (run,))
    overrides = copy.deepcopy(dict(run))
    if parse_resumable(benchmark.get("resumable")) is None:
        return overrides
    if str(executor).strip().lower() != "slurm":
        raise ValueError("resumable needs the slurm executor, not %r: only Slurm jobs can "
                         "chain themselves" % (executor,))
    if benchmark.get("command") is not None:
        raise ValueError("resumable does not work with a benchmark command: resuming "
                         "relies on gym eval run's cache; remove command or resumable")
    overrides.setdefault("resume_from_cache", True)
    return overrides


def parse_job_id(text, what="job ID"):
    """Return a validated Slurm job ID string; raise ValueError for anything else."""
    if isinstance(text, str) and JOB_ID_PATTERN.fullmatch(text) and int(text) < 2 ** 32:
        return text
    raise ValueError("malformed %s %r: expected a plain number such as 12345" % (what, text))


def parse_dependency(text):
    """Return the predecessor ID named by ``afternotok:<id>`` in SLURM_JOB_DEPENDENCY, or None."""
    predecessors = []
    for clause in re.split(r"[,?]", text or ""):
        kind, _, ids = clause.strip().partition(":")
        if kind.strip().lower() == "afternotok":
            for job_id in ids.split(":"):
                predecessors.append(parse_job_id(job_id.split("(")[0].strip(),
                                                 "afternotok job ID in SLURM_JOB_DEPENDENCY"))
    if len(set(predecessors)) > 1:
        raise ValueError("SLURM_JOB_DEPENDENCY %r names several afternotok jobs; a chain link "
                         "has exactly one predecessor" % (text,))
    return predecessors[0] if predecessors else None


SacctRecord = collections.namedtuple("SacctRecord", "job_id state elapsed submit start end")


def parse_sacct(text):
    """Return the allocation records in ``sacct -P -n -o`` SACCT_FIELDS output, by job ID.

    Step lines (``123.batch``) and malformed lines are ignored.
    """
    records = collections.OrderedDict()
    for line in (text or "").splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) != len(SACCT_FIELDS.split(",")) or not JOB_ID_PATTERN.fullmatch(fields[0]):
            continue
        job_id, state, elapsed, submit, start, end = fields
        if state:
            seconds = int(elapsed) if re.fullmatch(r"[0-9]{1,12}", elapsed) else 0
            records.setdefault(job_id, []).append(
                SacctRecord(job_id, state, seconds, submit, start, end))
    return records


def summarize_sacct(records):
    """Return one record for a job from all its records (``sacct -D``), or None.

    The newest record gives state, start and end. ``elapsed`` adds the runs
    of a requeued job: each earlier record that ended when the next one was
    submitted (Slurm resubmits a requeued job at once). Older records of the
    same ID that are not contiguous (an ID reused after a controller reset)
    are not counted.
    """
    if not records:
        return None
    ordered = sorted(records, key=lambda record: (record.submit, _open_last(record.start)))
    total = ordered[-1].elapsed
    for earlier, later in zip(reversed(ordered[:-1]), reversed(ordered[1:])):
        gap = _seconds_between(earlier.end, later.submit)
        if gap is None or abs(gap) > REQUEUE_GAP_SECONDS:
            break
        total += earlier.elapsed
    return ordered[-1]._replace(elapsed=total)


def _open_last(timestamp):
    # A time not yet known ("Unknown", "None") belongs to the newest, still open record.
    return timestamp if re.match(r"[0-9]{4}-", timestamp) else "9999"


def _seconds_between(earlier, later):
    try:
        return (calendar.timegm(time.strptime(later, "%Y-%m-%dT%H:%M:%S"))
                - calendar.timegm(time.strptime(earlier, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


ControllerJob = collections.namedtuple("ControllerJob", "state runtime time_limit")


def parse_scontrol(text):
    """Return ControllerJob(JobState, RunTime s, TimeLimit s or None) from ``scontrol show job``.

    Fields that are missing come back as None (RunTime as 0); an UNLIMITED time limit is None.
    """
    fields = dict(re.findall(r"(?:^|\s)(JobState|RunTime|TimeLimit)=(\S+)", text or ""))
    return ControllerJob(fields.get("JobState"), parse_duration(fields.get("RunTime")) or 0,
                         parse_duration(fields.get("TimeLimit")))


def base_state(state):
    """``"CANCELLED by 0"`` -> ``"CANCELLED"``; truncated ``"CANCELLED+"`` too."""
    words = str(state).strip().split()
    return words[0].rstrip("+").upper() if words else ""


def is_final(state):
    return STATE_MEANING.get(base_state(state)) != "lag"


# ---------------------------------------------------------------------------
# Decision (pure)
# ---------------------------------------------------------------------------


def decide(state, *, retries=0, walltime=0, max_retries=DEFAULT_MAX_RETRIES, max_walltime=None):
    """Decide what a job does given its predecessor's state; pure, no I/O.

    ``state`` is None for the first job, NOT_VISIBLE when the predecessor could
    not be found, or the state string as sacct prints it. ``walltime`` is the
    accumulated seconds including the predecessor; ``max_walltime`` seconds or None.
    """
    if state is None:
        return Decision("start", 0, "first job of the chain: starting fresh")
    if state == NOT_VISIBLE:
        return Decision("resume", retries, "predecessor's final state not visible in "
                        "accounting: resuming without counting a retry")
    meaning = STATE_MEANING.get(base_state(state), "retry")
    if meaning == "lag":
        return Decision("resume", retries, "predecessor still shows %s (accounting lag): "
                        "resuming without counting a retry" % state)
    if meaning == "complete":
        return Decision("complete", retries, "predecessor COMPLETED: the work is done")
    if meaning == "stop":
        return Decision("stop", retries, "predecessor %s: stopping the chain" % state)
    if meaning == "infra":
        if max_walltime is not None and walltime >= max_walltime:
            return Decision("stop", retries, "predecessor %s and accumulated walltime %d s "
                            "reached max_walltime %d s: stopping the chain"
                            % (state, walltime, max_walltime))
        return Decision("resume", retries, "predecessor %s: resuming (not counted as a retry)"
                        % state)
    if retries + 1 > max_retries:
        return Decision("fail", retries + 1, "predecessor %s: retry %d exceeds max_retries %d: "
                        "failing the chain" % (state, retries + 1, max_retries))
    return Decision("resume", retries + 1, "predecessor %s: retry %d of %d"
                    % (state, retries + 1, max_retries))


def apply_walltime_budget(decision, walltime, max_walltime):
    """Stop instead of starting a link that could not get Slurm's minimum time limit.

    A link's time limit is clamped to what is left of ``max_walltime``; when
    less than one minute is left no link can run, so the chain stops there.
    """
    if (decision.action in ("start", "resume") and max_walltime is not None
            and max_walltime - walltime < MIN_TIME_LIMIT):
        return Decision("stop", decision.retries, "only %d s of max_walltime %d s remain, less "
                        "than Slurm's 1-minute minimum time limit: stopping the chain"
                        % (max(max_walltime - walltime, 0), max_walltime))
    return decision


# ---------------------------------------------------------------------------
# State: the run directory's dot-files
# ---------------------------------------------------------------------------


class StateStore(object):
    """The chain's dot-files in one run directory: every read validated, every write atomic."""

    def __init__(self, directory):
        self.directory = directory

    def path(self, name):
        return os.path.join(self.directory, name)

    def _read_bytes(self, name, tail=None):
        """Return a state file's bytes (the last ``tail`` bytes if given), or None if missing."""
        path = self.path(name)
        if os.path.islink(path):
            raise StateError("state file %s is a symlink to %s; refusing to follow it (nothing "
                             "was changed)" % (path, os.readlink(path)))
        try:
            with open(path, "rb") as handle:
                if tail is not None:
                    handle.seek(0, os.SEEK_END)
                    handle.seek(max(0, handle.tell() - tail))
                return handle.read(tail or 65536)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise StateError("state file %s is a directory, not a file (nothing was changed)"
                             % path)
        except OSError as error:
            raise StateError("cannot read state file %s: %s (nothing was changed)"
                             % (path, error.strerror or error))

    def _corrupt(self, name, raw, expected):
        shown = raw.decode("utf-8", "backslashreplace") if raw else ""
        if len(shown) > 60:
            shown = shown[:60] + "..."
        return StateError("corrupt state file %s: content %r is not %s; fix or delete it "
                          "(nothing was changed, no work ran)" % (self.path(name), shown, expected))

    def read_counter(self, name):
        """Return an integer counter file's value; 0 when the file does not exist."""
        raw = self._read_bytes(name)
        if raw is None:
            return 0
        match = re.fullmatch(rb"\s*([0-9]{1,13})\s*", raw)
        if not match or int(match.group(1)) > MAX_COUNTER:
            raise self._corrupt(name, raw, "a whole number of at most %d" % MAX_COUNTER)
        return int(match.group(1))

    def last_job(self):
        """Return the last job ID of the chain file (read from its tail), or None if missing."""
        raw = self._read_bytes(CHAIN_FILE, tail=64)
        if raw is None:
            return None
        lines = raw.rstrip(b"\r\n").split(b"\n")
        last = lines[-1].strip().decode("ascii", "replace")
        if (len(lines) < 2 and len(raw) == 64) or not JOB_ID_PATTERN.fullmatch(last):
            raise self._corrupt(CHAIN_FILE, raw, "job IDs, one per line")
        return last

    def chain_jobs(self):
        """Return every job ID of the chain file (whole-file read: for status, not the hot path)."""
        path = self.path(CHAIN_FILE)
        if self._read_bytes(CHAIN_FILE, tail=1) is None:
            return []
        with open(path, "rb") as handle:
            raw = handle.read()
        jobs = raw.decode("ascii", "replace").split()
        if not jobs or not all(JOB_ID_PATTERN.fullmatch(job) for job in jobs):
            raise self._corrupt(CHAIN_FILE, raw, "job IDs, one per line")
        return jobs

    def read_journal(self):
        """Return the last transaction record (a dict), or None if there is none yet."""
        raw = self._read_bytes(JOURNAL_FILE)
        if raw is None:
            return None
        try:
            journal = json.loads(raw.decode("utf-8"))
        except ValueError:
            journal = None
        if not isinstance(journal, dict) or not JOB_ID_PATTERN.fullmatch(str(journal.get("job"))):
            raise self._corrupt(JOURNAL_FILE, raw, "a resumable_chain journal (JSON object)")
        return journal

    def write_journal(self, journal):
        self.write_text(JOURNAL_FILE, json.dumps(journal, sort_keys=True) + "\n")

    def write_counter(self, name, value):
        self.write_text(name, "%d\n" % value)

    def reset_chain(self, job_id):
        self.write_text(CHAIN_FILE, job_id + "\n")

    def append_job(self, job_id):
        """Append a job ID with one write() so a kill leaves the old or the new file, never half."""
        tail = self._read_bytes(CHAIN_FILE, tail=1)
        if tail is None:
            return self.reset_chain(job_id)
        line = ("" if tail in (b"", b"\n") else "\n") + job_id + "\n"
        try:
            descriptor = os.open(self.path(CHAIN_FILE), os.O_WRONLY | os.O_APPEND)
            try:
                os.write(descriptor, line.encode("ascii"))
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        except OSError as error:
            raise StateError("cannot append to %s: %s (old content kept)"
                             % (self.path(CHAIN_FILE), error.strerror or error))

    def write_text(self, name, text):
        """Replace a file atomically: temp file, fsync, rename, fsync of the directory."""
        path = self.path(name)
        temporary = "%s.tmp.%d" % (path, os.getpid())
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                payload = text.encode("utf-8")
                while payload:
                    payload = payload[os.write(descriptor, payload):]
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            os.replace(temporary, path)
            _fsync_directory(self.directory)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise StateError("cannot write %s: %s (old content kept)"
                             % (path, error.strerror or error))

    @contextlib.contextmanager
    def locked(self, wait=LOCK_WAIT_SECONDS):
        """Hold the run directory's lock (POSIX record lock: works on NFS with lockd)."""
        path = self.path(LOCK_FILE)
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise StateError("cannot open lock file %s: %s" % (path, error.strerror or error))
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as error:
                    if error.errno not in (errno.EACCES, errno.EAGAIN):
                        raise StateError("cannot lock %s: %s" % (path, error.strerror))
                    if time.monotonic() > deadline:
                        raise StateError("another process has held %s for over %d s; is "
                                         "another job of this chain stuck?" % (path, wait))
                    time.sleep(0.2)
            yield self
        finally:
            os.close(descriptor)


def _fsync_directory(directory):
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


# ---------------------------------------------------------------------------
# Slurm: every command goes through run_slurm()
# ---------------------------------------------------------------------------

SlurmResult = collections.namedtuple("SlurmResult", "returncode stdout stderr")


def run_slurm(argv, timeout=None, environ=None, submit=False, cwd=None):
    """Run one Slurm command with a timeout and a clean environment; never raises.

    ``returncode`` is None when the command timed out and 127 when it is missing.
    ``submit`` keeps the user's SBATCH_* defaults for sbatch; the allocation's
    SLURM_* variables (except SLURM_CONF) are always dropped.
    """
    timeout = timeout or command_timeout()
    environment = slurm_environment(os.environ if environ is None else environ, submit)
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=environment, cwd=cwd,
                                   start_new_session=True)
    except OSError as error:
        return SlurmResult(127, "", "%s: %s" % (argv[0], error.strerror or error))
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return SlurmResult(None, "", "%s timed out after %g s" % (argv[0], timeout))
    return SlurmResult(process.returncode, stdout.decode("utf-8", "replace"),
                       stderr.decode("utf-8", "replace"))


def slurm_environment(environ, submit=False):
    """The environment for a Slurm command: no stale allocation or output-format variables."""
    dropped = ("SLURM_", "SACCT_", "SQUEUE_", "SALLOC_", "SRUN_") + (() if submit else ("SBATCH_",))
    environment = {name: value for name, value in environ.items()
                   if name == "SLURM_CONF" or not name.startswith(dropped)}
    if not submit:
        environment["LC_ALL"] = "C"
    return environment


def command_timeout():
    return _positive_env_number(COMMAND_TIMEOUT_ENV, DEFAULT_COMMAND_TIMEOUT)


def lookup_window():
    return _positive_env_number(LOOKUP_SECONDS_ENV, DEFAULT_LOOKUP_SECONDS, allow_zero=True)


def _positive_env_number(name, default, allow_zero=False):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not (value > 0 or (allow_zero and value == 0)) or value > 86400:
        raise StateError("%s=%r is not a number of seconds (0 to 86400)" % (name, text))
    return value


def first_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[0] if lines else "no output"


def last_line(text):
    """The telling line of a Slurm error: the last one (earlier ones are often plugin noise)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


Lookup = collections.namedtuple("Lookup", "state elapsed source note")


def lookup_predecessor(predecessor_id, window=None, sleep=time.sleep, clock=time.monotonic):
    """Find a finished predecessor's final state and elapsed seconds.

    sacct first (allocation line, every run of a requeued ID), then the
    controller's memory while it still has the job; retried with a backoff
    for ``window`` seconds, then NOT_VISIBLE with the reason in ``note``.
    """
    predecessor_id = parse_job_id(predecessor_id, "predecessor job ID")
    window = lookup_window() if window is None else window
    deadline = clock() + window
    controller_knows = True
    note = ""
    for attempt in range(10 ** 6):
        remaining = deadline - clock()
        result = run_slurm(["sacct", "-j", predecessor_id, "-X", "-D", "-P", "-n",
                            "-o", SACCT_FIELDS],
                           timeout=min(command_timeout(), max(remaining, 5)))
        if result.returncode == 0:
            job = summarize_sacct(parse_sacct(result.stdout).get(predecessor_id))
            if job and is_final(job.state):
                return Lookup(job.state, job.elapsed, "sacct", "")
            note = "sacct still shows %s" % job.state if job else "sacct has no record of it"
        else:
            note = "sacct failed: %s" % last_line(result.stderr)
        if controller_knows:
            shown = run_slurm(["scontrol", "show", "job", "-o", predecessor_id],
                              timeout=min(command_timeout(), max(remaining, 5)))
            job = parse_scontrol(shown.stdout if shown.returncode == 0 else "")
            if job.state and is_final(job.state):
                return Lookup(job.state, job.runtime, "scontrol", "accounting lags; state from "
                              "the controller")
            controller_knows = shown.returncode == 0
        remaining = deadline - clock()
        if remaining <= 0:
            break
        sleep(min(LOOKUP_BACKOFF[min(attempt, len(LOOKUP_BACKOFF) - 1)], remaining))
    return Lookup(NOT_VISIBLE, 0, "", "%s after %g s" % (note, window))


def clamp_time_limit(job_id, budget):
    """Lower this job's own time limit to whole minutes of ``budget``; return the new limit.

    Users may lower (never raise) their running job's limit, so a chain ends
    within a minute of max_walltime instead of up to a whole allocation past
    it. Returns None when the limit already fits or Slurm refused (warned).
    """
    minutes = int(budget) // 60
    shown = run_slurm(["scontrol", "show", "job", "-o", job_id])
    if shown.returncode != 0:
        log("WARNING: cannot read job %s's time limit (%s); not clamped to the %d s left of "
            "max_walltime" % (job_id, last_line(shown.stderr), budget))
        return None
    limit = parse_scontrol(shown.stdout).time_limit
    if limit is not None and limit <= minutes * 60:
        return None
    updated = run_slurm(["scontrol", "update", "JobId=%s" % job_id, "TimeLimit=%d" % minutes])
    if updated.returncode != 0:
        log("WARNING: cannot lower job %s's time limit to %d min (%s)"
            % (job_id, minutes, last_line(updated.stderr)))
        return None
    return minutes * 60


def find_pending_successors(job_id):
    """Return the IDs of queued jobs that wait on ``afternotok:job_id`` (squeue; None if it failed)."""
    user = pwd.getpwuid(os.getuid()).pw_name
    result = run_slurm(["squeue", "-h", "-u", user, "-t", "PENDING", "-o", "%i|%E"])
    if result.returncode != 0:
        return None
    successors = []
    for line in result.stdout.splitlines():
        queued_id, _, dependency = line.strip().partition("|")
        with contextlib.suppress(ValueError):
            if parse_dependency(dependency.replace("(unfulfilled)", "")) == job_id:
                successors.append(parse_job_id(queued_id))
    return successors


SuccessorSpec = collections.namedtuple("SuccessorSpec", "script sbatch_args script_args job_name")


def submit_successor(job_id, spec):
    """Queue this job's successor; return its ID, or None with a warning on stderr.

    The job name is passed on because the default script, Slurm's spool copy,
    would otherwise rename every successor to ``slurm_script``.
    """
    argv = (["sbatch", "--parsable"] + (["--job-name=" + spec.job_name] if spec.job_name else [])
            + list(spec.sbatch_args)
            + ["--dependency=afternotok:%s" % job_id, "--kill-on-invalid-dep=yes", "--no-requeue",
               spec.script] + list(spec.script_args))
    result = run_slurm(argv, submit=True)
    successor_id = None
    if result.returncode == 0:
        with contextlib.suppress(ValueError):
            successor_id = parse_job_id(first_line(result.stdout).split(";")[0], "sbatch output")
    if successor_id is None:
        problem = (last_line(result.stderr) if result.returncode != 0
                   else "unexpected sbatch output %r" % first_line(result.stdout))
        log("WARNING: could not queue a successor of job %s (%s). Chain will NOT continue on "
            "failure." % (job_id, problem))
    return successor_id


def log(message):
    sys.stderr.write("resumable-chain: %s\n" % message)
    sys.stderr.flush()


# ---------------------------------------------------------------------------
# The in-job step: decide, record, queue the successor
# ---------------------------------------------------------------------------

TERMINAL_EXIT = {"complete": EXIT_DONE, "stop": EXIT_DONE, "fail": EXIT_FAIL}  # no work, no successor


def run_link(run_dir, max_retries, max_walltime, spec, environ):
    """Everything a job's prologue does; returns the step's exit status (EXIT_*).

    ``spec`` (a SuccessorSpec) says how the successor is submitted.
    """
    job_id = environ.get("SLURM_JOB_ID")
    if not job_id:
        raise StateError("not inside a Slurm batch job (SLURM_JOB_ID is not set); nothing done")
    job_id = parse_job_id(job_id, "SLURM_JOB_ID")
    if environ.get("SLURM_ARRAY_JOB_ID"):
        raise StateError("job %s is an array task: array jobs cannot be chained (each task would "
                         "queue a successor); nothing queued, no work" % job_id)
    predecessor_id = parse_dependency(environ.get("SLURM_JOB_DEPENDENCY"))
    if predecessor_id is None:
        _make_run_dir(run_dir)
    elif not os.path.isdir(run_dir):
        raise StateError("run directory %s is missing: the chain's state is lost; no work, no "
                         "successor (resubmit to start a new chain)" % run_dir)
    store = StateStore(run_dir)
    with store.locked():
        journal = store.read_journal()
        if journal and journal.get("phase") == "counted":
            _apply(store, journal)  # finish what a killed job had decided
        walltime = store.read_counter(WALLTIME_FILE)
        retries = store.read_counter(RETRIES_FILE)
        last_job = store.last_job()
        if (journal and journal["job"] == job_id) or (not journal and last_job == job_id):
            return _rerun(store, journal, job_id, spec, environ)
        if predecessor_id is None and journal and journal.get("successor") == job_id:
            predecessor_id = journal["job"]
        _check_not_duplicate(journal, job_id, predecessor_id)
        if predecessor_id is None:
            found = Lookup(None, 0, "", "")
        else:
            found = lookup_predecessor(predecessor_id)
        accumulated = 0 if found.state is None else walltime + found.elapsed
        decision = apply_walltime_budget(
            decide(found.state, retries=retries, walltime=accumulated, max_retries=max_retries,
                   max_walltime=max_walltime), accumulated, max_walltime)
        journal = {"job": job_id, "predecessor": predecessor_id, "state": found.state,
                   "action": decision.action, "reason": decision.reason, "walltime": accumulated,
                   "retries": decision.retries, "max_retries": max_retries,
                   "max_walltime": max_walltime, "successor": None, "phase": "counted",
                   "time": int(time.time())}
        store.write_journal(journal)
        _apply(store, journal)
        if decision.action in TERMINAL_EXIT:
            _log_decision(journal, found)
            return TERMINAL_EXIT[decision.action]
        journal["successor"] = submit_successor(job_id, spec)
        journal["phase"] = "queued"
        store.write_journal(journal)
        if max_walltime is not None:
            journal["time_limit"] = clamp_time_limit(job_id, max_walltime - accumulated)
        _log_decision(journal, found)
        return EXIT_WORK


def _make_run_dir(run_dir):
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as error:
        raise StateError("cannot create run directory %s: %s" % (run_dir, error.strerror or error))


def _apply(store, journal):
    """Write a decided transaction into the user-visible state files (idempotent)."""
    store.write_counter(WALLTIME_FILE, journal["walltime"])
    store.write_counter(RETRIES_FILE, journal["retries"])
    if journal["action"] == "start":
        store.reset_chain(journal["job"])
    elif journal["action"] == "resume" and store.last_job() != journal["job"]:
        store.append_job(journal["job"])
    journal["phase"] = "recorded" if journal["action"] in ("start", "resume") else "done"
    store.write_journal(journal)


def _rerun(store, journal, job_id, spec, environ):
    """The same job ID again (requeue, or a rerun after a crash): never count twice."""
    restarts = environ.get("SLURM_RESTART_COUNT", "0")
    if journal is None:  # a chain written before the journal existed
        journal = {"job": job_id, "predecessor": None, "state": None, "action": "resume",
                   "reason": "", "walltime": store.read_counter(WALLTIME_FILE),
                   "retries": store.read_counter(RETRIES_FILE), "successor": None,
                   "phase": "recorded"}
    found = Lookup(journal.get("state"), 0, "journal", "job %s already ran its prologue "
                   "(restart %s): predecessor not counted again" % (job_id, restarts))
    if journal["action"] in TERMINAL_EXIT:
        _log_decision(journal, found)
        return TERMINAL_EXIT[journal["action"]]
    if not journal.get("successor"):
        pending = find_pending_successors(job_id)
        if pending:
            journal["successor"] = pending[0]
        else:
            journal["successor"] = submit_successor(job_id, spec)
        journal["phase"] = "queued"
        store.write_journal(journal)
    _log_decision(journal, found)
    return EXIT_WORK


def _check_not_duplicate(journal, job_id, predecessor_id):
    if not journal or predecessor_id is None:
        return
    if journal.get("predecessor") == predecessor_id:
        raise StateError("job %s is a duplicate link: predecessor %s was already continued by job "
                         "%s; no work, no successor" % (job_id, predecessor_id, journal["job"]))
    if journal["job"] == predecessor_id and journal.get("successor") not in (None, job_id):
        raise StateError("job %s is a duplicate link: job %s queued %s as its successor; no work, "
                         "no successor" % (job_id, predecessor_id, journal["successor"]))


def _log_decision(journal, found):
    predecessor = journal.get("predecessor")
    if predecessor is None:
        seen = "none (first job)"
    else:
        seen = "%s %s" % (predecessor, journal.get("state") or NOT_VISIBLE)
        if found.source in ("sacct", "scontrol"):
            seen += " (elapsed %d s, from %s)" % (found.elapsed, found.source)
    cap = journal.get("max_walltime")
    clamp = (" | time limit lowered to %d min" % (journal["time_limit"] // 60)
             if journal.get("time_limit") else "")
    log("job %s: %s | predecessor %s | walltime %d/%s s | retries %d/%s | successor %s%s | %s%s"
        % (journal["job"], journal["action"], seen, journal["walltime"],
           cap if cap is not None else "unlimited", journal["retries"],
           journal.get("max_retries", "?"), journal.get("successor") or "none", clamp,
           journal.get("reason") or "", (" (%s)" % found.note) if found.note else ""))


# ---------------------------------------------------------------------------
# Operating a chain: status and cancel
# ---------------------------------------------------------------------------

STATUS_ROWS = 1000  # status shows at most this many of the newest links


def _open_chain(run_dir):
    """Return (store, jobs, journal) of an existing chain; StateError if DIR is not one."""
    if not os.path.isdir(run_dir):
        raise StateError("%s is not a directory" % run_dir)
    store = StateStore(run_dir)
    journal = store.read_journal()
    jobs = store.chain_jobs()
    if not jobs and journal is None:
        raise StateError("%s is not a chain: it has no %s" % (run_dir, CHAIN_FILE))
    return store, jobs, journal


def query_jobs(job_ids):
    """Return {job ID: (state, elapsed, start, end)} from one sacct call plus squeue for live jobs."""
    found = {}
    if not job_ids:
        return found
    result = run_slurm(["sacct", "-j", ",".join(job_ids), "-X", "-D", "-P", "-n",
                        "-o", SACCT_FIELDS])
    if result.returncode == 0:
        for job_id, records in parse_sacct(result.stdout).items():
            job = summarize_sacct(records)
            found[job_id] = (job.state, job.elapsed, job.start, job.end)
    live = [job_id for job_id in job_ids if job_id not in found or not is_final(found[job_id][0])]
    if live:
        result = run_slurm(["squeue", "-h", "-j", ",".join(live), "-o", "%i|%T|%M|%S"])
        for line in result.stdout.splitlines() if result.returncode == 0 else ():
            fields = line.strip().split("|")
            if len(fields) == 4 and fields[0] in live:
                found[fields[0]] = (fields[1], parse_duration(fields[2]) or 0, fields[3], "")
    return found


def chain_status(run_dir):
    """Return the status of the chain in run_dir as a dict (what ``status --json`` prints)."""
    store, jobs, journal = _open_chain(run_dir)
    journal = journal or {}
    shown = jobs[-STATUS_ROWS:]
    successor = journal.get("successor")
    known = query_jobs(shown + ([successor] if successor and successor not in shown else []))
    rows = []
    for job_id in shown:
        state, elapsed, start, end = known.get(job_id, ("UNKNOWN", 0, "", ""))
        rows.append({"job": job_id, "state": state, "elapsed": elapsed, "start": start,
                     "end": end})
    successor_state = known.get(successor, ("UNKNOWN",))[0] if successor else None
    pending = successor if successor_state in ("PENDING",) else None
    status = {"run_dir": os.path.abspath(run_dir), "jobs": rows, "jobs_in_chain": len(jobs),
              "walltime": store.read_counter(WALLTIME_FILE),
              "max_walltime": journal.get("max_walltime"),
              "retries": store.read_counter(RETRIES_FILE),
              "max_retries": journal.get("max_retries"), "successor": successor,
              "successor_state": successor_state, "pending_successor": pending}
    status["verdict"] = _verdict(journal, rows, pending, successor_state)
    return status


def _verdict(journal, rows, pending, successor_state):
    action = journal.get("action")
    if action == "complete":
        return "finished: the work completed (job %s found its predecessor COMPLETED)" % journal["job"]
    if action in ("stop", "fail"):
        return "%s: %s" % ("stopped" if action == "stop" else "failed", journal.get("reason"))
    last = rows[-1] if rows else None
    last_state = base_state(last["state"]) if last else ""
    if last_state in ("RUNNING", "COMPLETING", "SUSPENDED"):
        return "running: job %s is %s" % (last["job"], last["state"])
    if last_state == "COMPLETED":
        return "finished: job %s COMPLETED" % last["job"]
    if pending:
        return "waiting: successor %s is pending" % pending
    if last_state in ("PENDING", "CONFIGURING"):
        return "waiting: job %s is %s" % (last["job"], last["state"])
    if last and last_state == "UNKNOWN":
        return "unknown: Slurm no longer knows job %s" % last["job"]
    return "ended: job %s ended %s and no successor is pending (%s)" % (
        last["job"] if last else "?", last["state"] if last else "?",
        "successor %s is %s" % (journal.get("successor"), successor_state)
        if journal.get("successor") else "none was queued")


def show_status(run_dir, as_json):
    status = chain_status(run_dir)
    if as_json:
        sys.stdout.write(json.dumps(status, indent=2, sort_keys=True) + "\n")
        return 0
    lines = ["chain in %s: %d job(s)" % (status["run_dir"], status["jobs_in_chain"]),
             "%-12s %-20s %10s  %-19s  %-19s" % ("JOBID", "STATE", "ELAPSED", "START", "END")]
    for row in status["jobs"]:
        lines.append("%-12s %-20s %10s  %-19s  %-19s" % (
            row["job"], row["state"], format_duration(row["elapsed"]), row["start"], row["end"]))
    cap = status["max_walltime"]
    lines.append("walltime: %s of %s" % (format_duration(status["walltime"]),
                                         format_duration(cap) if cap else "unlimited"))
    lines.append("retries: %d of %s" % (status["retries"], status["max_retries"]
                                        if status["max_retries"] is not None else "?"))
    lines.append("pending successor: %s" % (status["pending_successor"] or "none"))
    lines.append("verdict: %s" % status["verdict"])
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def cancel_chain(run_dir, dry_run=False):
    """Cancel pending successors first, then the running link; verify nothing is left."""
    store, jobs, journal = _open_chain(run_dir)
    journal = journal or {}
    links = [job for job in (jobs[-1:] + [journal.get("job"), journal.get("successor")]) if job]
    cancelled, leftover = [], []
    for _round in range(5):
        known = query_jobs(sorted(set(links), key=int))
        pending = set(job for job in links if known.get(job, ("",))[0] == "PENDING")
        for job in list(links):
            pending.update(find_pending_successors(job) or ())
        running = set(job for job in links if known.get(job, ("",))[0] in
                      ("RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING")) - pending
        leftover = sorted(pending | running, key=int)
        if not leftover or dry_run:
            break
        for group in (sorted(pending, key=int), sorted(running, key=int)):
            if group:
                result = run_slurm(["scancel"] + group)
                if result.returncode != 0:
                    log("scancel %s: %s" % (" ".join(group), last_line(result.stderr)))
                cancelled += group
        links = sorted(set(links) | pending | running, key=int)
        time.sleep(0.5)
    if dry_run:
        sys.stdout.write("would cancel: %s\n" % (" ".join(leftover) or "nothing"))
        return 0
    sys.stdout.write("cancelled: %s\n" % (" ".join(cancelled) or "nothing"))
    if leftover:
        sys.stdout.write("still pending or running: %s\n" % " ".join(leftover))
        return 1
    return 0

# ---------------------------------------------------------------------------
# Prologue rendering
# ---------------------------------------------------------------------------

PROLOGUE_TEMPLATE = """\
# >>> resumable_chain {version}: decide, record and queue the successor before any work >>>
resumable_chain_status=0
# shellcheck disable=SC2016  # single quotes keep paths and arguments literal on purpose
{command} || resumable_chain_status=$?
if [ "$resumable_chain_status" -eq {done} ]; then exit 0; fi
if [ "$resumable_chain_status" -ne 0 ]; then exit "$resumable_chain_status"; fi
unset resumable_chain_status
# <<< resumable_chain <<<
"""


def check_sbatch_args(sbatch_args):
    """Return sbatch_args as a list of strings; raise ValueError for options that break a chain."""
    if isinstance(sbatch_args, str):
        raise ValueError("sbatch_args must be a list of arguments, not the string %r"
                         % sbatch_args)
    checked = []
    for argument in sbatch_args:
        if not isinstance(argument, str) or "\0" in argument:
            raise ValueError("sbatch argument %r is not a string" % (argument,))
        option = argument.split("=", 1)[0]
        if option in REFUSED_SBATCH_OPTIONS or (
                re.fullmatch(r"-[ad].*", argument) and not argument.startswith("--")):
            reason = REFUSED_SBATCH_OPTIONS.get(option) or REFUSED_SBATCH_OPTIONS[argument[:2]]
            raise ValueError("sbatch option %r is not allowed in a chain: %s" % (argument, reason))
        checked.append(argument)
    return checked


def module_path():
    path = os.path.realpath(__file__)
    return path[:-1] if path.endswith(".pyc") else path


def render_prologue(benchmark_dir, *, max_retries=DEFAULT_MAX_RETRIES, max_walltime=None,
                    script=None, sbatch_args=(), python="python3"):
    """Return the bash snippet a job script puts after its #SBATCH lines, before any work.

    It runs this module's in-job step and exits the job when the chain ends
    (0 for complete or stop, 1 for fail, 2 for bad state). Works with and
    without ``set -euo pipefail``; every value is shell-quoted.
    """
    if not isinstance(benchmark_dir, str) or not benchmark_dir or "\0" in benchmark_dir:
        raise ValueError("benchmark_dir must be a non-empty path, got %r" % (benchmark_dir,))
    if not isinstance(python, str) or not python.strip() or "\0" in python:
        raise ValueError("python must be an interpreter command such as python3, got %r"
                         % (python,))
    _check_max_retries(max_retries)
    max_walltime = _check_max_walltime(max_walltime)
    argv = [python, module_path(), "prologue", "--max-retries", str(max_retries)]
    if max_walltime is not None:
        argv.append("--max-walltime=" + format_duration(max_walltime))
    argv += ["--sbatch-arg=" + argument for argument in check_sbatch_args(sbatch_args)]
    if script is not None:
        if not isinstance(script, str) or not script or "\0" in script:
            raise ValueError("script must be a path, got %r" % (script,))
        argv.append("--script=" + os.path.abspath(script))
    argv.append(os.path.abspath(benchmark_dir))
    command = " ".join(shlex.quote(argument) for argument in argv)
    if script is None:
        command += ' --script="$0"'  # the running batch script (Slurm's spool copy)
    command += ' -- ${1+"$@"}'
    return PROLOGUE_TEMPLATE.format(version=__version__, command=command, done=EXIT_DONE)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so main() stays the only place that exits."""

    def error(self, message):
        raise StateError("%s: %s (see --help)" % (self.prog, message))


def _split_at_dashes(argv):
    if "--" in argv:
        index = argv.index("--")
        return argv[:index], argv[index + 1:]
    return argv, []


def _walltime_option(text):
    try:
        return parse_walltime(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error))


def _retries_option(text):
    if not re.fullmatch(r"[0-9]{1,6}", text):
        raise argparse.ArgumentTypeError("max retries must be a whole number >= 0, got %r" % text)
    return int(text)


def _build_parser():
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="resumable-chain", formatter_class=formatter, description=__doc__)
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    render = commands.add_parser(
        "render", formatter_class=formatter, help="print the prologue for a job script",
        description="Print the bash prologue to paste after a job script's #SBATCH lines.\n"
                    "Options after -- are given to sbatch for every successor.",
        epilog="example:\n  resumable-chain render runs/gpqa --max-walltime 48:00:00 -- -p gpu")
    render.add_argument("run_dir", metavar="DIR", help="the run directory holding the state")
    render.add_argument("--max-retries", type=_retries_option, default=DEFAULT_MAX_RETRIES,
                        help="non-timeout failures to retry (default %(default)s)")
    render.add_argument("--max-walltime", type=_walltime_option, default=None,
                        help="cap on accumulated walltime, e.g. 48:00:00 (default: none)")
    render.add_argument("--script", default=None,
                        help="script the successor is submitted with (default: this job's)")
    render.add_argument("--python", default="python3", help="interpreter on compute nodes")

    prologue = commands.add_parser(
        "prologue", formatter_class=formatter, help="the in-job step (called by the prologue)",
        description="Decide from the predecessor's final state, record it in DIR and queue the\n"
                    "successor. Exit 0: run the work; 3: the chain is done (exit 0 without\n"
                    "work); 1: max_retries exceeded; 2: bad input or state. Arguments after --\n"
                    "are the job script's own arguments, passed on to the successor.",
        epilog="example (inside a batch job):\n  python3 resumable_chain.py prologue --max-retries"
               " 3 --script=\"$0\" runs/gpqa -- \"$@\"")
    prologue.add_argument("run_dir", metavar="DIR")
    prologue.add_argument("--max-retries", type=_retries_option, default=DEFAULT_MAX_RETRIES)
    prologue.add_argument("--max-walltime", type=_walltime_option, default=None)
    prologue.add_argument("--script", required=True, help="script the successor runs")
    prologue.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                          help="one extra sbatch argument for the successor (repeatable)")

    status = commands.add_parser(
        "status", formatter_class=formatter, help="show a chain's jobs, counters and verdict",
        description="Show the jobs of the chain in DIR, its counters and a verdict.",
        epilog="example:\n  resumable-chain status runs/gpqa --json")
    status.add_argument("run_dir", metavar="DIR")
    status.add_argument("--json", action="store_true", help="print one JSON object")

    cancel = commands.add_parser(
        "cancel", formatter_class=formatter, help="stop a chain for good",
        description="Cancel the chain's pending successors first, then its running link.",
        epilog="example:\n  resumable-chain cancel runs/gpqa --dry-run")
    cancel.add_argument("run_dir", metavar="DIR")
    cancel.add_argument("--dry-run", action="store_true", help="only print what would be done")
    return parser


def main(argv=None):
    """Run the command line; return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    options, extra = _split_at_dashes(argv)
    try:
        arguments = _build_parser().parse_args(options)
        if arguments.command == "render":
            sys.stdout.write(render_prologue(
                arguments.run_dir, max_retries=arguments.max_retries,
                max_walltime=arguments.max_walltime, script=arguments.script, sbatch_args=extra,
                python=arguments.python))
            return 0
        if arguments.command == "prologue":
            spec = SuccessorSpec(arguments.script, check_sbatch_args(arguments.sbatch_arg), extra,
                                 os.environ.get("SLURM_JOB_NAME"))
            return run_link(os.path.abspath(arguments.run_dir), arguments.max_retries,
                            arguments.max_walltime, spec, os.environ)
        if extra:
            raise StateError("%s takes no arguments after --" % arguments.command)
        if arguments.command == "status":
            return show_status(arguments.run_dir, arguments.json)
        if arguments.command == "cancel":
            return cancel_chain(arguments.run_dir, arguments.dry_run)
        _build_parser().print_help(sys.stderr)
        return EXIT_USAGE
    except SystemExit as exit_request:  # --help and --version
        return exit_request.code if isinstance(exit_request.code, int) else 0
    except (StateError, ValueError) as error:
        log("error: %s" % error)
        return EXIT_USAGE
    except KeyboardInterrupt:
        log("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
