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
import collections
import collections.abc
import contextlib
import copy
import errno
import fcntl
import itertools
import json
import os
import pwd
import re
import shlex
import signal
import stat
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
    "chain_status",
    "cancel_chain",
    "submit_chain",
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
CANCEL_FILE = ".resumable_chain.cancelled"  # written by cancel: any link that still starts stops
SUBMIT_FILE = ".resumable_chain.submit.json"  # written by submit: first job, script, options

LOOKUP_SECONDS_ENV = "RESUMABLE_CHAIN_LOOKUP_SECONDS"  # accounting-lag window override
DEFAULT_LOOKUP_SECONDS = 60  # how long a missing predecessor is looked for
LOOKUP_BACKOFF = (0.5, 1, 1.5, 2, 3, 4, 6, 8, 10, 12)  # pauses between sacct tries
COMMAND_TIMEOUT_ENV = "RESUMABLE_CHAIN_COMMAND_TIMEOUT"  # per-command timeout override
DEFAULT_COMMAND_TIMEOUT = 60  # seconds one Slurm command may take before it is killed
MIN_COMMAND_TIMEOUT = 5  # even at the end of the lookup window a query gets this long
LOCK_WAIT_SECONDS = 300  # a lock held longer than this means a stuck writer
CRASH_ENV = "RESUMABLE_CHAIN_TEST_KILL_AT"  # tests only: SIGKILL self at the Nth checkpoint
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

JOB_ID_PATTERN = re.compile(r"[1-9][0-9]{0,9}")  # a plain Slurm job ID (federated ones included)
DURATION_PATTERN = re.compile(
    r"(?:(?P<days>[0-9]+)-(?P<dh>[0-9]+)(?::(?P<dm>[0-9]+)(?::(?P<ds>[0-9]+))?)?"
    r"|(?P<a>[0-9]+)(?::(?P<b>[0-9]+)(?::(?P<c>[0-9]+))?)?)"
)  # M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
SACCT_FIELDS = "JobID,State,ElapsedRaw,Submit,Start,End"  # what sacct is asked for (-P -n)
REQUEUE_GAP_SECONDS = 120  # a record ending this close to the next submit is the same job, requeued
DURATION_FORMS = "M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (e.g. 90, 48:00:00, 2-00)"


class StateError(Exception):
    """An expected failure: bad input, corrupt state, Slurm refusing. One line for the user."""


Decision = collections.namedtuple("Decision", "action retries reason")
Decision.__doc__ = "What a job does: action (one of ACTIONS), updated retries, and why."

class Settings(dict):
    """A validated ``resumable:`` setting: ``max_retries`` and ``max_walltime`` (seconds or None).

    A dict, so it compares with and unpacks like the mapping it came from
    (``render_prologue(run_dir, **settings)``), and readable as attributes.
    """

    __slots__ = ()
    KEYS = ("max_retries", "max_walltime")  # the only keys a resumable: mapping may have

    def __init__(self, max_retries=DEFAULT_MAX_RETRIES, max_walltime=None):
        dict.__init__(self, max_retries=max_retries, max_walltime=max_walltime)

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name)

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
    unknown = sorted(str(key) for key in value if key not in Settings.KEYS)
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


def first_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[0] if lines else "no output"


def last_line(text):
    """The telling line of a Slurm error: the last one (earlier ones are often plugin noise)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def parse_sbatch_output(text):
    """Return the job ID sbatch printed (``--parsable``: ``ID[;cluster]``), or None."""
    match = re.fullmatch(r"(?:Submitted batch job )?([0-9]+)(?:;\S*)?", first_line(text))
    with contextlib.suppress(ValueError, AttributeError):
        return parse_job_id(match.group(1), "sbatch output")
    return None


SacctRecord = collections.namedtuple("SacctRecord", "job_id state elapsed submit start end")


def parse_sacct(text):
    """Return the allocation records in ``sacct -P -n -o`` SACCT_FIELDS output, by job ID.

    Step lines (``123.batch``) and malformed lines are ignored; a line with
    fewer fields than asked for still gives its job ID, state and elapsed time.
    """
    records = collections.OrderedDict()
    for line in (text or "").splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) < 2 or not JOB_ID_PATTERN.fullmatch(fields[0]):
            continue
        fields += ["Unknown"] * (6 - len(fields))
        job_id, state, elapsed, submit, start, end = fields[:6]
        if state and not state[0].isdigit():
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
    import calendar  # only requeued jobs get here: keep it off the prologue's import time
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
        try:  # O_NONBLOCK: a FIFO planted as a state file must not hang the job
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StateError("cannot read state file %s: %s (nothing was changed)"
                             % (path, error.strerror or error))
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            os.close(descriptor)
            raise StateError("state file %s is a %s, not a regular file (nothing was changed)"
                             % (path, "directory" if stat.S_ISDIR(mode) else "special file"))
        with os.fdopen(descriptor, "rb") as handle:
            try:
                if tail is not None:
                    handle.seek(0, os.SEEK_END)
                    handle.seek(max(0, handle.tell() - tail))
                return handle.read(tail or 65536)
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

    def read_submitted(self):
        """Return what ``submit`` recorded (a dict), or None."""
        raw = self._read_bytes(SUBMIT_FILE)
        try:
            record = None if raw is None else json.loads(raw.decode("utf-8"))
        except ValueError:
            record = "corrupt"
        if raw is not None and not isinstance(record, dict):
            raise self._corrupt(SUBMIT_FILE, raw, "a resumable_chain submit record (JSON object)")
        return record

    def read_cancelled(self):
        """Return when the chain was cancelled (the mark's text), or None."""
        raw = self._read_bytes(CANCEL_FILE)
        return None if raw is None else (raw.decode("utf-8", "replace").strip() or "yes")

    def remove(self, name):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(name))

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
                _checkpoint()
                os.write(descriptor, line.encode("ascii"))
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            _checkpoint()
        except OSError as error:
            raise StateError("cannot append to %s: %s (old content kept)"
                             % (self.path(CHAIN_FILE), error.strerror or error))

    def write_text(self, name, text, mode=0o644):
        """Replace a file atomically: temp file, fsync, rename, fsync of the directory."""
        path = self.path(name)
        temporary = "%s.tmp.%d" % (path, os.getpid())
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            try:
                payload = text.encode("utf-8")
                while payload:
                    payload = payload[os.write(descriptor, payload):]
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            _checkpoint()
            os.replace(temporary, path)
            _fsync_directory(self.directory)
            _checkpoint()
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


_checkpoints_passed = [0]  # how many checkpoints this process passed (crash-injection tests)


def _checkpoint():
    """Between two steps that change state: where the crash-injection tests kill the job."""
    target = os.environ.get(CRASH_ENV)
    if target:
        _checkpoints_passed[0] += 1
        if str(_checkpoints_passed[0]) == target:
            os.kill(os.getpid(), signal.SIGKILL)


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


def run_slurm(argv, timeout=None, submit=False):
    """Run one Slurm command with a timeout and a clean environment; never raises.

    ``returncode`` is None when the command timed out and 127 when it is missing.
    ``submit`` keeps the user's SBATCH_* defaults for sbatch; the allocation's
    SLURM_* variables (except SLURM_CONF) are always dropped.
    """
    _checkpoint()
    timeout = timeout or command_timeout()
    environment = slurm_environment(os.environ, submit)
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=environment,
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
    ask_controller, note, controller_note = True, "", ""
    for attempt in itertools.count():
        remaining = deadline - clock()
        timeout = min(command_timeout(), max(remaining, MIN_COMMAND_TIMEOUT))
        result = run_slurm(["sacct", "-j", predecessor_id, "-X", "-D", "-P", "-n",
                            "-o", SACCT_FIELDS], timeout=timeout)
        if result.returncode == 0:
            job = summarize_sacct(parse_sacct(result.stdout).get(predecessor_id))
            if job and is_final(job.state):
                return Lookup(job.state, job.elapsed, "sacct", "")
            note = "sacct still shows %s" % job.state if job else "sacct has no record of it"
        else:
            note = "sacct failed: %s" % last_line(result.stderr)
        if ask_controller:
            shown = run_slurm(["scontrol", "show", "job", "-o", predecessor_id], timeout=timeout)
            job = parse_scontrol(shown.stdout if shown.returncode == 0 else "")
            if job.state and is_final(job.state):
                return Lookup(job.state, job.runtime, "scontrol", "%s; state from the "
                              "controller" % note)
            if shown.returncode != 0:
                controller_note = "; scontrol: %s" % last_line(shown.stderr)
            # Once forgotten (MinJobAge) or hung, asking the controller again cannot help.
            ask_controller = shown.returncode is not None and "Invalid job id" not in shown.stderr
        remaining = deadline - clock()
        if remaining <= 0:
            break
        sleep(min(LOOKUP_BACKOFF[min(attempt, len(LOOKUP_BACKOFF) - 1)], remaining))
    return Lookup(NOT_VISIBLE, 0, "", "%s%s after %g s" % (note, controller_note, window))


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


def pending_dependents():
    """Return {predecessor ID: [pending job IDs]} of this user's afternotok jobs; None if squeue failed."""
    user = pwd.getpwuid(os.getuid()).pw_name
    result = run_slurm(["squeue", "-h", "-u", user, "-t", "PENDING", "-o", "%i|%E"])
    if result.returncode != 0:
        return None
    dependents = {}
    for line in result.stdout.splitlines():
        queued_id, _, dependency = line.strip().partition("|")
        with contextlib.suppress(ValueError):
            predecessor = parse_dependency(dependency.replace("(unfulfilled)", ""))
            if predecessor:
                dependents.setdefault(predecessor, []).append(parse_job_id(queued_id))
    return dependents


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
    successor_id = parse_sbatch_output(result.stdout) if result.returncode == 0 else None
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
            _check_no_live_chain(journal, job_id)
            store.remove(CANCEL_FILE)  # a new chain in this directory
            found = Lookup(None, 0, "", "")
        else:
            cancelled = store.read_cancelled()
            found = (Lookup("CANCELLED (resumable-chain cancel)", 0, "",
                            "the chain was cancelled at %s" % cancelled) if cancelled
                     else lookup_predecessor(predecessor_id))
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
            journal["phase"] = "done"
            store.write_journal(journal)
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
    """Write a decided transaction into the user-visible state files (idempotent).

    The journal stays in phase "counted" until the successor is known: a job
    killed in between redoes this (same values) and then looks for the
    successor in squeue before queueing one.
    """
    for name, value in ((WALLTIME_FILE, journal["walltime"]), (RETRIES_FILE, journal["retries"])):
        if store.read_counter(name) != value or not os.path.exists(store.path(name)):
            store.write_counter(name, value)
    if journal["action"] == "start":
        store.reset_chain(journal["job"])
    elif journal["action"] == "resume" and store.last_job() != journal["job"]:
        store.append_job(journal["job"])


def _rerun(store, journal, job_id, spec, environ):
    """The same job ID again (requeue, or a rerun after a crash): never count twice."""
    restarts = environ.get("SLURM_RESTART_COUNT", "0")
    if journal is None:  # a chain written before the journal existed
        journal = {"job": job_id, "predecessor": None, "state": None, "action": "resume",
                   "reason": "", "walltime": store.read_counter(WALLTIME_FILE),
                   "retries": store.read_counter(RETRIES_FILE), "successor": None,
                   "phase": "queued"}
    found = Lookup(journal.get("state"), 0, "journal", "job %s already ran its prologue "
                   "(restart %s): predecessor not counted again" % (job_id, restarts))
    if journal["action"] in TERMINAL_EXIT:
        _log_decision(journal, found)
        return TERMINAL_EXIT[journal["action"]]
    if not journal.get("successor"):
        pending = (pending_dependents() or {}).get(job_id)
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


def _check_no_live_chain(journal, job_id):
    """A first job must not start a second chain beside one whose links still run or wait."""
    if not journal or journal.get("action") not in ("start", "resume"):
        return
    links = [job for job in (journal["job"], journal.get("successor")) if job]
    try:
        live = live_jobs(links)
    except StateError as error:  # a safety net: an unreachable squeue must not block a restart
        log("WARNING: cannot check whether the previous chain (jobs %s) still runs: %s"
            % (" ".join(links), error))
        return
    if live:
        raise StateError("job %s would start a second chain in a directory whose chain is live "
                         "(%s); no work, no successor (cancel it with resumable-chain cancel)"
                         % (job_id, ", ".join("job %s %s" % (job, live[job][0])
                                              for job in sorted(live, key=int))))


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
# Operating a chain: status, cancel, submit
# ---------------------------------------------------------------------------

STATUS_ROWS = 1000  # status shows at most this many of the newest links
LIVE_STATES = ("PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "REQUEUED",
               "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED",
               "SPECIAL_EXIT", "RESV_DEL_HOLD")  # squeue states of a job that may still run
CANCEL_ROUNDS = 5  # cancel retries what started meanwhile at most this often


class Chain(collections.namedtuple("Chain", "store jobs journal submitted")):
    """What a run directory says about its chain: links, last decision, submission."""

    def candidates(self):
        """Job IDs that may still be queued or running: last links, successor, first job."""
        journal = self.journal or {}
        ids = self.jobs[-2:] + [journal.get("job"), journal.get("successor"),
                                (self.submitted or {}).get("first_job")]
        return sorted(set(job for job in ids if job and JOB_ID_PATTERN.fullmatch(str(job))),
                      key=int)


def open_chain(run_dir, must_exist=True):
    """Read the chain in run_dir; StateError if it is not a chain (and must_exist)."""
    if not os.path.isdir(run_dir):
        if not must_exist:
            return Chain(StateStore(run_dir), [], None, None)
        raise StateError("%s is not a directory" % run_dir)
    store = StateStore(run_dir)
    chain = Chain(store, store.chain_jobs(), store.read_journal(), store.read_submitted())
    if must_exist and not chain.jobs and chain.journal is None and chain.submitted is None:
        raise StateError("%s is not a chain: it has no %s" % (run_dir, CHAIN_FILE))
    return chain


def live_jobs(job_ids):
    """Return {job ID: state} of the jobs squeue still shows; StateError if squeue fails."""
    if not job_ids:
        return {}
    result = run_slurm(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i|%T|%M|%S"])
    if result.returncode != 0 and "Invalid job id" not in result.stderr:
        raise StateError("squeue failed: %s" % last_line(result.stderr))
    live = {}
    for line in result.stdout.splitlines():
        fields = line.strip().split("|")
        if len(fields) == 4 and fields[0] in job_ids:
            live[fields[0]] = fields[1:]
    return live


def query_jobs(job_ids):
    """Return {job ID: (state, elapsed, start, end)}: one sacct call, squeue for live jobs."""
    found = {}
    if not job_ids:
        return found
    result = run_slurm(["sacct", "-j", ",".join(job_ids), "-X", "-D", "-P", "-n",
                        "-o", SACCT_FIELDS])
    for job_id, records in (parse_sacct(result.stdout) if result.returncode == 0 else {}).items():
        job = summarize_sacct(records)
        found[job_id] = (job.state, job.elapsed, job.start, job.end)
    unsettled = [job_id for job_id in job_ids if job_id not in found or not is_final(found[job_id][0])]
    with contextlib.suppress(StateError):
        for job_id, (state, elapsed, start) in live_jobs(unsettled).items():
            found[job_id] = (state, parse_duration(elapsed) or 0, start, "")
    return found


def chain_status(run_dir):
    """Return the status of the chain in run_dir as a dict (what ``status --json`` prints)."""
    chain = open_chain(run_dir)
    journal, submitted = chain.journal or {}, chain.submitted or {}
    shown = chain.jobs[-STATUS_ROWS:]
    successor = journal.get("successor")
    first = submitted.get("first_job")
    extra = [job for job in (first, successor) if job and job not in shown and
             (job != first or not chain.jobs or int(first) > int(chain.jobs[-1]))]
    known = query_jobs(shown + extra)
    rows = []
    for job_id in shown + extra:
        state, elapsed, start, end = known.get(job_id, ("UNKNOWN", 0, "", ""))
        rows.append({"job": job_id, "state": state, "elapsed": elapsed, "start": start,
                     "end": end, "link": job_id in shown})
    successor_state = known.get(successor, ("UNKNOWN",))[0] if successor else None
    settings = journal if "max_retries" in journal else submitted
    status = {"run_dir": os.path.abspath(run_dir), "jobs": rows, "links": len(chain.jobs),
              "walltime": chain.store.read_counter(WALLTIME_FILE),
              "max_walltime": settings.get("max_walltime"),
              "retries": chain.store.read_counter(RETRIES_FILE),
              "max_retries": settings.get("max_retries"), "successor": successor,
              "successor_state": successor_state,
              "pending_successor": successor if successor_state == "PENDING" else None,
              "cancelled": chain.store.read_cancelled()}
    status["verdict"] = _verdict(journal, rows, status)
    return status


def _verdict(journal, rows, status):
    action = journal.get("action")
    states = [(row["job"], base_state(row["state"]), row["state"]) for row in rows]
    running = [job for job in states if job[1] in LIVE_STATES and job[1] != "PENDING"]
    pending = [job for job in states if job[1] == "PENDING"]
    if status["cancelled"] and not running and not pending:
        return "stopped: cancelled with resumable-chain cancel (%s)" % status["cancelled"]
    if action == "complete":
        return "finished: job %s found its predecessor COMPLETED" % journal["job"]
    if action in ("stop", "fail"):
        return "%s: %s" % ("stopped" if action == "stop" else "failed", journal.get("reason"))
    if running:
        return "running: job %s is %s" % (running[-1][0], running[-1][2])
    if pending:
        return "waiting: job %s is pending" % pending[-1][0]
    links = [job for job, row in zip(states, rows) if row["link"]] or states
    if not links:
        return "unknown: no job recorded yet"
    job_id, state, shown = links[-1]
    if state == "COMPLETED":
        return "finished: job %s COMPLETED" % job_id
    if state == "UNKNOWN":
        return "unknown: Slurm no longer knows job %s" % job_id
    return "ended: job %s ended %s and no successor is pending" % (job_id, shown)


def show_status(run_dir, as_json):
    status = chain_status(run_dir)
    if as_json:
        sys.stdout.write(json.dumps(status, indent=2, sort_keys=True) + "\n")
        return 0
    lines = ["chain in %s: %d link(s) ran" % (status["run_dir"], status["links"]),
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
    """Stop a chain for good: mark it, cancel pending successors, then the running link.

    The mark makes any link that still starts stop without work. Verifies that
    nothing of the chain is left, cancelling again what started meanwhile.
    Returns 0 when nothing is left, 1 with the leftover IDs otherwise.
    """
    chain = open_chain(run_dir)
    if not dry_run:
        chain.store.write_text(CANCEL_FILE, time.strftime("%Y-%m-%dT%H:%M:%S") + "\n")
    links, cancelled, leftover = chain.candidates(), [], []
    for _round in range(CANCEL_ROUNDS):
        dependents = pending_dependents()
        if dependents is None:
            raise StateError("squeue failed: cannot see the chain's pending jobs")
        pending, frontier = set(), list(links)
        while frontier:  # successors of successors, queued while we looked
            job = frontier.pop()
            for successor in dependents.get(job, ()):
                if successor not in pending:
                    pending.add(successor)
                    frontier.append(successor)
        live = live_jobs(sorted(set(links) | pending, key=int))
        pending |= set(job for job, (state, _, _) in live.items() if state == "PENDING")
        running = set(job for job in live if job not in pending)
        leftover = sorted(pending | running, key=int)
        if not leftover or dry_run:
            break
        for group in (sorted(pending, key=int), sorted(running, key=int)):
            if group:
                result = run_slurm(["scancel"] + group)
                if result.returncode != 0:
                    log("scancel %s: %s" % (" ".join(group), last_line(result.stderr)))
                cancelled += [job for job in group if job not in cancelled]
        links = sorted(set(links) | set(leftover), key=int)
        time.sleep(1)
    else:
        leftover = sorted(set(live_jobs(links)), key=int)
    if dry_run:
        sys.stdout.write("would cancel: %s\n" % (" ".join(leftover) or "nothing"))
        return 0
    sys.stdout.write("cancelled: %s\n" % (" ".join(cancelled) or "nothing"))
    if leftover:
        sys.stdout.write("still pending or running: %s\n" % " ".join(leftover))
        return 1
    return 0


def split_batch_script(text):
    """Return (header, body): the #! line with the #SBATCH/comment block, and the rest."""
    lines = text.splitlines(True)
    if not lines or not lines[0].startswith("#!"):
        raise StateError("not a batch script: it must start with a #! line such as #!/bin/bash")
    end = 1
    while end < len(lines) and (not lines[end].strip() or lines[end].lstrip().startswith("#")):
        end += 1
    return "".join(lines[:end]), "".join(lines[end:])


def script_directives(header):
    """Return the sbatch options of a script header's #SBATCH lines, as arguments."""
    options = []
    for line in header.splitlines():
        match = re.match(r"#SBATCH\s+(.*)", line.strip())
        if match:
            with contextlib.suppress(ValueError):
                options += shlex.split(match.group(1), comments=True)
    return options


def has_option(arguments, short, long_name):
    """Whether sbatch arguments set an option, in any of its spellings."""
    return any(argument == long_name or argument.startswith(long_name + "=")
               or (argument.startswith(short) and not argument.startswith("--"))
               for argument in arguments)


def submit_chain(run_dir, script, script_args, sbatch_options, max_retries=DEFAULT_MAX_RETRIES,
                 max_walltime=None, force=False, python="python3"):
    """Make SCRIPT resumable in run_dir, submit its first job, and return that job's ID."""
    try:
        with open(script, "rb") as handle:
            text = handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise StateError("cannot read batch script %s: %s" % (script, getattr(error, "strerror",
                                                                             None) or error))
    header, body = split_batch_script(text)
    directives = script_directives(header)
    if has_option(directives, "-a", "--array"):
        raise StateError("%s has an #SBATCH --array line: array jobs cannot be chained" % script)
    sbatch_options = check_sbatch_args(sbatch_options)
    run_dir = os.path.abspath(run_dir)
    chain = open_chain(run_dir, must_exist=False)
    live = live_jobs(chain.candidates())
    if live and not force:
        raise StateError("%s holds a live chain (jobs %s): cancel it first (resumable-chain "
                         "cancel %s) or pass --force" % (run_dir, " ".join(sorted(live, key=int)),
                                                         run_dir))
    if not has_option(directives + sbatch_options, "-o", "--output"):
        sbatch_options = ["--output=" + os.path.join(run_dir, "slurm-%j.out")] + sbatch_options
    copy = os.path.join(run_dir, "resumable-" + os.path.basename(script))
    prologue = render_prologue(run_dir, max_retries=max_retries, max_walltime=max_walltime,
                               script=copy, sbatch_args=sbatch_options, python=python)
    _make_run_dir(run_dir)
    store = StateStore(run_dir)
    store.write_text(os.path.basename(copy), header + prologue + body, mode=0o755)
    for name in (CHAIN_FILE, WALLTIME_FILE, RETRIES_FILE, JOURNAL_FILE, CANCEL_FILE):
        if os.path.isfile(store.path(name)):  # a new chain: keep the old one's files aside
            os.replace(store.path(name), store.path(name) + ".prev")
    result = run_slurm(["sbatch", "--parsable", "--no-requeue"] + sbatch_options + [copy]
                       + list(script_args), submit=True)
    first_job = parse_sbatch_output(result.stdout) if result.returncode == 0 else None
    if first_job is None:
        raise StateError("sbatch refused the first job: %s" % (
            last_line(result.stderr) if result.returncode else first_line(result.stdout)))
    store.write_text(SUBMIT_FILE, json.dumps({
        "first_job": first_job, "script": copy, "original": os.path.abspath(script),
        "sbatch_options": sbatch_options, "script_args": list(script_args),
        "max_retries": max_retries, "max_walltime": max_walltime,
        "time": int(time.time())}, sort_keys=True) + "\n")
    log("submitted job %s: a resumable copy of %s is %s" % (first_job, script, copy))
    sys.stdout.write(first_job + "\n")
    return first_job


# ---------------------------------------------------------------------------
# Prologue rendering
# ---------------------------------------------------------------------------

# Imports the module from its file instead of running it as a script: Python never caches a
# script's bytecode, and compiling this file costs a link about 20 ms. sys.path[0] becomes the
# module's directory, exactly as for ``python3 resumable_chain.py``.
BOOTSTRAP = ("import os, sys; path = sys.argv.pop(1); sys.path[0] = os.path.dirname(path); "
             "sys.exit(__import__(os.path.basename(path)[:-3]).main())")

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
    argv = [python, "-c", BOOTSTRAP, module_path(), "prologue", "--max-retries", str(max_retries)]
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

    submit = commands.add_parser(
        "submit", formatter_class=formatter, help="make any batch script resumable and submit it",
        usage="resumable-chain submit DIR [--max-retries N] [--max-walltime T] [--force] "
              "[--python PY] [SBATCH_OPTIONS...] [--] SCRIPT [ARGS...]",
        description="Write a resumable copy of SCRIPT into DIR (the prologue inserted after its\n"
                    "#!/#SBATCH header), submit it with --no-requeue and print the first job ID.\n"
                    "SBATCH_OPTIONS go to the first job and every successor. Without --, they\n"
                    "must be written --option=value. Logs go to DIR/slurm-<jobid>.out unless the\n"
                    "script or the options set --output. Refuses array jobs and a DIR whose\n"
                    "chain is still queued or running (unless --force).",
        epilog="example:\n  resumable-chain submit runs/a -p gpu --time=4:00:00 -- train.sbatch "
               "--lr 3e-4")
    submit.add_argument("run_dir", metavar="DIR")
    return parser


SUBMIT_FLAGS = ("--force",)  # submit's own options without a value
SUBMIT_VALUES = ("--max-retries", "--max-walltime", "--python")  # submit's own options with one


def parse_submit(argv):
    """Split ``submit``'s arguments: (dir, own options, sbatch options, script, script args)."""
    before, after = _split_at_dashes(argv)
    if "--" not in argv:  # SCRIPT is the first word after DIR that is no option or its value
        index = 1
        while index < len(before) and (before[index].startswith("-")
                                       or before[index - 1] in SUBMIT_VALUES):
            index += 1
        before, after = before[:index], before[index:]
    if not before or before[0].startswith("-") or not after:
        raise StateError("submit: give DIR first and SCRIPT after the options (see --help)")
    own = {"max_retries": DEFAULT_MAX_RETRIES, "max_walltime": None, "force": False,
           "python": "python3"}
    sbatch_options, arguments = [], iter(before[1:])
    for argument in arguments:
        name, has_value, value = argument.partition("=")
        if name in SUBMIT_FLAGS and not has_value:
            own["force"] = True
        elif name in SUBMIT_VALUES:
            value = value if has_value else next(arguments, None)
            if value is None:
                raise StateError("submit: %s needs a value" % name)
            own[name[2:].replace("-", "_")] = value
        else:
            sbatch_options.append(argument)
    try:
        own["max_retries"] = _retries_option(str(own["max_retries"]))
        own["max_walltime"] = _check_max_walltime(own["max_walltime"])
    except argparse.ArgumentTypeError as error:
        raise StateError("submit: %s" % error)
    return before[0], own, sbatch_options, after[0], after[1:]


def main(argv=None):
    """Run the command line; return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    options, extra = _split_at_dashes(argv)
    try:
        if argv[:1] == ["submit"] and not set(options) & {"-h", "--help"}:
            run_dir, own, sbatch_options, script, script_args = parse_submit(argv[1:])
            submit_chain(run_dir, script, script_args, sbatch_options, **own)
            return 0
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
