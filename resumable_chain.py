# Copyright 2026 The resumable_chain authors
# SPDX-License-Identifier: Apache-2.0
#
# Licensed under the Apache License, Version 2.0 (the "License"); you may not
# use this file except in compliance with the License. You may obtain a copy
# at http://www.apache.org/licenses/LICENSE-2.0. Distributed on an "AS IS"
# BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND.
"""Make a Slurm batch job a self-chaining, resumable sequence.

When a link runs out of walltime, is preempted or loses its node, the next
link continues the run. Each job's prologue looks up its predecessor's final
state, decides (start, resume, complete, stop, fail), keeps the chain's state
in dot-files of the run directory and queues its successor (afternotok) before
the work starts; a guard job continues the chain if the successor dies before
its prologue. Only a chain's owner acts on it (docs/trust-model.md).

Vendor it (``render_prologue(run_dir, max_walltime="48:00:00")`` returns the
snippet for a job script; ``decide()``, ``parse_resumable()``) or run it as a
command (render, submit, status, cancel, resume, budget) with Python 3.6+ and Slurm.

Contents: 1. Tables; 2. Slurm; 3. A link starts; 4. The run directory; 5. The decision;
  6. The successor; 7. The work starts; 8. Arrays; 9. Budget (--budget-dir);
  10. Notify (--notify); 11. Warn (--warn SIG@S); 12. The background step and the guard;
  13. Render; 14. Operations; 15. Command line.
"""

import sys

# Run as a command, Python puts the script's directory (-m: the current one) first on sys.path: a
# json.py a colleague adds beside a shared copy would run as whoever runs it. Built-in sys only.
if __name__ == "__main__" and not (sys.flags.isolated or getattr(sys.flags, "safe_path", 0)):
    del sys.path[0]

import collections
import contextlib
import errno
import fcntl
import functools
import itertools
import json
import os
import select
import signal
import stat
import subprocess
import time

__version__ = "0.7.0"
__all__ = ["NOT_VISIBLE", "STOP_CAUSES", "RECORD_FIELDS", "Record", "ACTIONS", "Decision",
           "Settings", "StateError", "decide", "parse_walltime", "parse_resumable",
           "render_prologue", "chain_status", "chains_status", "chain_dirs", "EVENTS", "Event",
           "cancel_chain", "submit_chain", "resume_chain", "budget_report", "set_budget", "main"]

# ---------------------------------------------------------------------------
# 1. Tables: constants, records and errors every section uses
# ---------------------------------------------------------------------------

NOT_VISIBLE = "NOT_VISIBLE"  # the predecessor could not be found in sacct or scontrol
ACTIONS = ("start", "resume", "complete", "stop", "fail")  # every action decide() returns
WORK_ACTIONS = ("start", "resume")  # the link runs its work and queues a successor
DEFAULT_MAX_RETRIES = 3  # failures retried before the chain fails
MAX_COUNTER = 10 ** 12  # larger counter values are corruption, not history
COUNTER_BYTES = 64  # a longer counter file is corruption (it is read whole up to this size)
MAX_RETRIES_LIMIT = MAX_COUNTER - 1  # the retries counter must still fit after one more retry
MIN_TIME_LIMIT = 60  # Slurm's smallest time limit: a link needs at least this much budget
MAX_TIME_LIMIT = (2 ** 32 - 3) * 60  # Slurm's largest (uint32 minutes; the top two are special)

CHAIN_FILE = ".gym_job_chain"  # one job ID per line: every job that ran its work
WALLTIME_FILE = ".gym_accumulated_walltime"  # integer seconds used by finished links
RETRIES_FILE = ".gym_infra_retries"  # integer count of retried failures
JOURNAL_FILE = ".resumable_chain.json"  # the last Record: crash roll-forward, status, resume
LOCK_FILE = ".resumable_chain.lock"  # serializes every writer of one run directory
CANCEL_FILE = ".resumable_chain.cancelled"  # written by cancel: any link that still starts stops
SUBMIT_FILE = ".resumable_chain.submit.json"  # written by submit: first job, script, options
SCRIPT_COPY = ".resumable_chain.script"  # the job script saved by a first job, for resume
STAGED_SCRIPT = ".resumable_chain.staged"  # submit's script before sbatch accepted it
BUDGET_FILE = ".resumable_chain.budget.json"  # a walltime budget shared by several chains
BUDGET_LOCK = ".resumable_chain.budget.lock"  # serializes every link drawing on one budget
EVENTS_FILE = ".resumable_chain.events.json"  # the chain's events, each notified at most once
NOTIFY_FILE = ".resumable_chain.notify"  # the notify command (it may hold a token): owner only
PREVIOUS_SUFFIX = ".prev"  # submit keeps the previous chain's files under this suffix

LOOKUP_SECONDS_ENV = "RESUMABLE_CHAIN_LOOKUP_SECONDS"  # accounting-lag window override
DEFAULT_LOOKUP_SECONDS = 60  # how long a missing predecessor is looked for
LOOKUP_BACKOFF = (0.5, 1, 1.5, 2, 3, 4, 6, 8, 10, 12)  # pauses between sacct tries
COMMAND_TIMEOUT_ENV = "RESUMABLE_CHAIN_COMMAND_TIMEOUT"  # per-command timeout override
DEFAULT_COMMAND_TIMEOUT = 60  # seconds one Slurm command may take before it is killed
SBATCH_TIMEOUT_FACTOR = 3  # rate-limited sbatch sleeps 1, 2, 3 s...: 180 s is 18 tries, not 10
MIN_COMMAND_TIMEOUT = 5  # even at the end of the lookup window a query gets this long
LOCK_WAIT_SECONDS = 300  # a lock held longer than this means a stuck writer
MAX_SCRIPT_BYTES = 4 << 20  # Slurm's default max_script_size: a longer script is refused
MAX_STATE_BYTES = 1 << 20  # a longer JSON state file is corrupt; the chain file: read by its tail
MAX_WORDS = 1024  # more sbatch or script arguments are corrupt (each costs status a parse)
MAX_EVENTS = 100  # the events file keeps the newest (a planted million would cost every status)
NAMED_ENV = "RESUMABLE_CHAIN_NAMED"  # "1": the journal names this job (resume or a guard queued it)
# A guard's SBATCH_* defaults, for the links it queues, in its environment (Slurm exports it):
# never on its command line, which anyone may read (scontrol's Command, sacct's SubmitLine)
KEPT_SBATCH = "RESUMABLE_CHAIN_KEPT_SBATCH_"
VIEW_WAIT_SECONDS = 90  # how long a view of the run directory may lag (NFS caches up to 60 s)
VIEW_WAIT_ENV = "RESUMABLE_CHAIN_VIEW_WAIT"  # its override in seconds (tests: 0)
LOCAL_FILESYSTEMS = frozenset(("ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs",
                               "ramfs", "overlay"))  # one page cache: views never lag
LOCK_ENV = "RESUMABLE_CHAIN_LOCK"  # "kernel" or "file": force one kind of lock
LOCK_KINDS = ("kernel", "file")
HELD_SUFFIX = ".held"  # the file lock: <lock file>.held, created exclusively, names its holder
LOCKS_HELD = set()  # the lock files this process holds: POSIX locks are the process's, not a file's
# errno of a lock call without kernel locks, the file lock's cue (Lustre noflock; NFS, no lockd)
NO_KERNEL_LOCK = frozenset((errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL))
# fstype: the mount options saying its kernel locks are missing or node-local (None: always;
# BeeGFS global locks are a client setting, off by default, not shown)
NODE_LOCAL_LOCKS = dict.fromkeys(("nfs", "nfs4"), ("nolock", "local_lock=posix", "local_lock=all"))
NODE_LOCAL_LOCKS.update(lustre=("localflock", "noflock"), beegfs=None)
CRASH_ENV = "RESUMABLE_CHAIN_TEST_KILL_AT"  # tests only: SIGKILL self at the Nth checkpoint
REQUEUE_GAP_SECONDS = 120  # a record ending this close to the next submit is the same job, requeued
STATUS_ROWS = 1000  # status shows at most this many of the newest links
STATUS_SECONDS = 60  # chains not read by then are rows that say so: the table always prints
STATUS_BYTES = 256 << 20  # so are those past this many bytes of state files (status keeps them)
COLLECTION_ROWS = 2  # status of several chains asks about this many newest links of each
CANCEL_ROUNDS = 5  # cancel retries what started meanwhile at most this often
EXPORT_PREFIX = "RESUMABLE_CHAIN_"  # variables the prologue exports to the work
NOTIFY_TIMEOUT = 30  # seconds a notify command may take before its session is killed
CHAIN_DEPTH = 3  # levels below a status PARENT searched for chains (runs/sweep/<task>)
QUERY_CHUNK = 2000  # job IDs per sacct or squeue of a status (an argument of ~20 KiB)
JOBS_PER_TASK = 3  # a sweep task's jobs queued at once: link, successor, successor's guard
# sbatch's words (slurm_errno.c) when a job limit refuses a job (or a size or time limit, which a
# chain's first job passed): an outage until a job of the user ends
JOB_LIMIT_REFUSAL = "Job violates accounting/QOS policy"
# and its words for options no retry fixes: a guard's sbatch of the same options fails the same
REFUSED_OPTIONS = ("Invalid partition name", "Invalid account", "Invalid qos", "Invalid wckey",
                   "Invalid generic resource", "Invalid feature", "Invalid node name",
                   "Requested node configuration is not available", "Requested time limit is")
UNLIMITED_END = 365 * 24 * 3600  # Slurm's end of a job without a time limit: start + a year
RETRY_DELAYS = (10, 20, 40, 60)  # seconds between a guard's tries of sbatch, then every 60 s
SHELLS = frozenset(("bash", "sh", "dash", "ksh", "mksh", "zsh"))  # warned only if they trap it
# bash catches these (with every signal that would kill it) only to run an EXIT trap, then dies
EXIT_TRAP_MARKS = (signal.SIGXFSZ, signal.SIGVTALRM, signal.SIGSYS)
WARN_POLL = 30  # seconds the warning timer sleeps at most between looks at its batch shell
GUARD_TRIES_SECONDS = 240  # how long a guard keeps looking and trying sbatch
GUARD_REQUEUES = 30  # a guard the job limit refuses (some 4 h) or a preemption ends requeues itself
NODE_DEATHS = 10  # deaths before the prologue the cluster caused, replaced in a row (not retries)
NODE_ENDS = ("NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "CANCELLED")  # CANCELLED: the node Prolog's
GUARD_MINUTES = 10  # its tries, a lagging view's wait, the lock's: never killed before it journals
GUARD_MEMORY = "256M"  # a guard asks for one CPU and this: never the links' resources
GUARD_PREFIX = "g:"  # before a guard's link's name: squeue cuts names at 8 characters
GUARD_LOG = ".resumable_chain.guard.log"  # what the guards did, a line each, for a person
CONTINUED_WITH = "the chain continued with job "  # a guard's words when it queued a job (status)
EVENTS = ("finished", "stopped", "failed", "broken", "healed", "resumed")  # what notify hears
EVENT_OF_ACTION = {"complete": "finished", "stop": "stopped", "fail": "failed"}  # a link's end

EXIT_WORK = 0  # in-job step: run the work
EXIT_FAIL = 1  # in-job step: max_retries exceeded; the job fails without work
EXIT_USAGE = 2  # bad input, corrupt state, refused operation
EXIT_DONE = 3  # in-job step: chain finished (complete or stop); the job exits 0
ACTION_EXIT = {"start": EXIT_WORK, "resume": EXIT_WORK, "complete": EXIT_DONE,
               "stop": EXIT_DONE, "fail": EXIT_FAIL}

# What a predecessor's base state means for its successor.
INTERRUPTED = "interrupted"  # Slurm ended it: free resume, capped by max_walltime
RETRY = "retry"  # the job itself failed: costs a retry (every state not listed, too)
COMPLETE = "complete"  # the work finished
STOP = "stop"  # a person (or Slurm, for an invalid dependency) cancelled it
LAG = "lag"  # not final: accounting or the controller has not caught up with the end yet
RESUME_ASKED = "resume asked"  # the work exited RESUME_EXIT: progress saved, resume (no retry)
STOP_ASKED = "stop asked"  # the work exited STOP_EXIT: it can never finish, stop the chain
NO_PROGRESS = "no progress"  # RESUME_EXIT within NO_PROGRESS_SECONDS: a retry (a loop otherwise)
NO_PROGRESS_SECONDS = 60  # a link that asks to resume sooner made no progress
RESUME_EXIT = 75  # EX_TEMPFAIL; the work learns it as RESUMABLE_CHAIN_EXIT_RESUME
STOP_EXIT = 76  # the work learns it as RESUMABLE_CHAIN_EXIT_STOP
WORK_EXIT_MEANING = {RESUME_EXIT: RESUME_ASKED, STOP_EXIT: STOP_ASKED}  # if FAILED, by exit status
STATE_MEANING = {state: meaning for meaning, states in (
    (COMPLETE, "COMPLETED"), (STOP, "CANCELLED"), (INTERRUPTED, "TIMEOUT PREEMPTED NODE_FAIL"),
    (RETRY, "FAILED OUT_OF_MEMORY BOOT_FAIL DEADLINE"),
    (LAG, "PENDING RUNNING SUSPENDED COMPLETING CONFIGURING REQUEUED REQUEUE_FED REQUEUE_HOLD "
     "RESIZING SIGNALING STAGE_OUT STOPPED SPECIAL_EXIT RESV_DEL_HOLD"))
    for state in states.split()}
LIVE_STATES = frozenset(state for state, meaning in STATE_MEANING.items() if meaning == LAG)

# Why a chain ended, as data on its record (``cause``), and what status says of it: the verdict's
# word, the verdict and what to do next (filled in from the record, ``resume`` and ``budget``).
STOP_CAUSES = {
    "completed": ("finished", "finished: job {job} found its predecessor COMPLETED", None),
    "cancelled": ("stopped", "stopped: job {predecessor} was {cancelled_by}",
                  "{resume} continues it"),
    "max_walltime": ("stopped", "stopped: {reason}",
                     "{resume} --max-walltime T with a larger cap continues it"),
    "max_retries": ("failed", "failed: {reason}",
                    "fix the job script the links run (a submitted chain's copy in its "
                    "directory; a pasted prologue's chain: its .resumable_chain.script, which "
                    "resume queues) or its input, then {resume} (retries start again at 0)"),
    "cancel": ("stopped", "stopped: {reason}", "{resume} continues it"),  # resumable-chain cancel
    "budget": ("stopped", "stopped: {reason}",
               "raise the budget ({budget} --max-walltime T), then {resume}"),
    "work": ("stopped", "stopped by the work (exit {predecessor_exit_code}): job {predecessor} "
             "asked the chain to stop", "{resume} continues it, if the work can go on after all"),
    "no_progress": ("failed", "failed: {reason}", "fix why the work asks to resume within a "
                    "minute (its log says), then {resume} (retries start again at 0)"),
    "work_done": ("finished", "finished: job {predecessor}'s work exited 0 (its exit trap said "
                  "so) though Slurm recorded {predecessor_state}; job {job}, queued before the "
                  "work ended, found nothing left to do", None),  # _work_done_before
    None: ("stopped", "stopped: {reason}", "{resume} continues it"),  # a cause unknown here
}
# The cause when decide() ends the chain, by what the predecessor's state means (LAG never does).
CAUSE_OF_MEANING = {COMPLETE: "completed", STOP: "cancelled", INTERRUPTED: "max_walltime",
                    RETRY: "max_retries", RESUME_ASKED: "max_walltime", STOP_ASKED: "work",
                    NO_PROGRESS: "no_progress"}

# Loads the module by path under python -I -S, so that neither the job's Python environment nor
# a json.py next to the module shadows the standard library. Bytecode is read only from where no
# one else can write (a colleague's would run as the caller; docs/trust-model.md says where), and
# what the loader creates gets no group or world write, whatever the umask (the work keeps it).
BOOTSTRAP = """\
import collections, errno, fcntl, itertools, json, os, signal, stat, subprocess, sys, time
from importlib.machinery import SourceFileLoader
def mine(path, look=os.lstat):  # a directory (or none yet) only the caller or root can write in
    try:
        found = look(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return found.st_uid in (0, os.getuid()) and stat.S_ISDIR(found.st_mode) and \\
        not found.st_mode & 0o022
p, cache = sys.argv.pop(1), os.path.expanduser("~/.cache/resumable_chain")
try:
    os.stat(p)
except OSError as error:  # moved or deleted after the render: one line, never a traceback
    sys.stderr.write("resumable-chain: error: cannot read the module %s (%s); the links and guards "
                     "of this chain run it from there: put it back, then resume the chain if it "
                     "stopped\\n" % (p, error.strerror))
    os._exit(2)
c = os.path.join(os.path.dirname(p), "__pycache__")
here = mine(os.path.dirname(p)) and mine(c)
umask = os.umask(0o022)
os.umask(umask | 0o022)
prefix = None
if not (here and os.access(c if os.path.isdir(c) else os.path.dirname(c), os.W_OK)) and \\
        sys.version_info >= (3, 8):
    steps = [os.path.join(cache, os.path.dirname(p).lstrip(os.sep))]  # where the loader puts it
    while steps[-1] != cache:
        steps.append(os.path.dirname(steps[-1]))
    prefix = cache if mine(os.path.dirname(cache), os.stat) and mine(cache, os.stat) and \\
        all(map(mine, steps[:-1])) else None
m = type(sys)("resumable_chain")
m.__file__ = p
sys.modules[m.__name__] = m
sys.pycache_prefix = prefix
loader = SourceFileLoader(m.__name__, p)
if here or prefix:
    loader.exec_module(m)
else:
    exec(compile(loader.get_data(p), p, "exec"), m.__dict__)
sys.pycache_prefix = None
os.umask(umask)
status = m.main(sys.argv[1:])
sys.stdout.flush(), sys.stderr.flush()
os._exit(status)  # no teardown: after the prologue's fork it would copy every page it touches"""

# squeue's %r of a job held by Slurm or an admin: a person must release it (22.05, 26.05;
# scontrol's Reason= writes the last one with underscores)
HELD_BY_SLURM = {
    "JobHeldAdmin": "an admin held it, or Slurm did after its node Prolog failed",
    "JobHoldMaxRequeue": "Slurm requeued it MaxBatchRequeue times after launch failures",
    "launch failed requeued held": "its launch failed (node Prolog) and Slurm held it",
    # squeue shows JobHoldMaxRequeue's own words when Slurm set them (job_mgr.c)
    "launch failure limit exceeded requeued held": "Slurm requeued it MaxBatchRequeue times "
    "after launch failures and held it",
}

# squeue's reasons (22.05, 26.05; docs/slurm-releases.md) of a job that waits for a person to act
NEVER_STARTS = {
    "BadConstraints": "no node can satisfy its request (CPUs, memory, GRES, features)",
    "PartitionConfig": "its partition's configuration does not allow its request",
    "PartitionTimeLimit": "its time limit is over its partition's MaxTime",
    "PartitionNodeLimit": "it asks for more nodes than its partition allows",
    "MaxMemPerLimit": "its memory is over its partition's MaxMemPerNode or MaxMemPerCPU",
    "InvalidAccount": "its account is invalid",
    "InvalidQOS": "its QOS is invalid for its account",
    "AccountNotAllowed": "its partition does not allow its account",
    "QOSNotAllowed": "its partition does not allow its QOS",
    "ReservationDeleted": "its reservation was deleted",
    "ReservationInvalid": "its reservation is invalid",  # 26.05
    "DependencyNeverSatisfied": "its dependency can never be satisfied",
    "BurstBufferOperation": "its burst buffer operation failed",
}


def never_starts(reason):
    """Why a job pending for ``reason`` never starts itself: NEVER_STARTS, a per-job limit; None."""
    reason = reason or ""
    if reason.startswith(("QOS", "Assoc")) and (
            "PerJob" in reason or reason.endswith("PerNode") or reason.startswith("QOSMin")):
        return "it breaks a per-job limit of its QOS or association"
    return NEVER_STARTS.get(reason)


# Options that would break the chain if a user passed them to every successor.
REFUSED_SBATCH_OPTIONS = {
    "--dependency": "the chain sets the dependency itself",
    "--array": "give it to submit, which starts one chain per task (docs/arrays.md)",
    "--wrap": "a chain resubmits a job script: write the command in one and give its path",
    "--hold": "every successor would wait held (submit --hold holds the first job only)",
    "--test-only": "sbatch only says when the job would start and queues nothing (run sbatch "
                   "--test-only on the script itself)",
    "--wait": "sbatch would wait for the job to end (and be killed, leaving it queued)",
    "--quiet": "sbatch would not print the job ID the chain records",
}
REFUSED_SBATCH_OPTIONS.update(dict.fromkeys(("--autocomplete", "--help", "--usage", "--version"),
                                            "sbatch would only print text and queue nothing"))
# Refused in #SBATCH lines too: they change what sbatch does (not the job), or hold every link.
IN_NO_SCRIPT = ("--test-only", "--wait", "--quiet", "--hold")
REFUSED_SBATCH_ENV = {"SBATCH_ARRAY_INX": "--array", "SBATCH_WAIT": "--wait"}  # set, even empty


def _option_names(text):
    """``"account/A hold"`` -> ({"--account", "-A", "--hold"}, {"-A": "--account"})."""
    pairs = [word.partition("/")[::2] for word in text.split()]
    shorts = dict(("-" + short, "--" + name) for name, short in pairs if short)
    return frozenset(["--" + name for name, _ in pairs] + list(shorts)), shorts


# sbatch's options (22.05, 24.11, 26.05: tests/slurm_outputs/*/sbatch-options.txt) whose value may
# be the next word (-p debug), then the others (values only after '='); account/A: -A is --account
SBATCH_VALUE_OPTIONS, _VALUE_SHORT_NAMES = _option_names(
    "account/A acctg-freq array/a autocomplete batch bb bbf begin/b chdir/D cluster "
    "cluster-constraint clusters/M comment constraint/C container container-id container-type "
    "context core-spec/S cores-per-socket cpu-freq cpus-per-gpu cpus-per-task/c deadline "
    "delay-boot dependency/d distribution/m error/e exclude/x export export-file extra "
    "extra-node-info/B gid gpu-bind gpu-freq gpus/G gpus-per-node gpus-per-socket gpus-per-task "
    "gres gres-flags hint input/i job-name/J kill-on-invalid-dep licenses/L mail-type mail-user "
    "mcs-label mem mem-bind mem-per-cpu mem-per-gpu mem-update mincpus network nodefile/F "
    "nodelist/w nodes/N ntasks/n ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket "
    "ntasks-per-tres open-mode output/o partition/p power prefer priority profile qos/q "
    "reservation resources segment signal sockets-per-node switches tasks-per-node thread-spec "
    "threads threads-per-core time/t time-min tmp tres-bind tres-per-task uid wait-all-nodes wckey "
    "wrap")
SBATCH_OTHER_OPTIONS, SBATCH_SHORT_NAMES = _option_names(
    "consolidate-segments contiguous exclusive external get-user-env help/h hold/H ignore-pbs nice "
    "no-kill/k no-requeue oom-kill-step overcommit/O oversubscribe/s parsable propagate quiet/Q "
    "reboot requeue resv-ports spread-job spread-segments stepmgr test-only usage use-min-nodes "
    "verbose/v version/V wait/W")
SBATCH_SHORT_NAMES.update(_VALUE_SHORT_NAMES)

SHELL_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-")
DURATION_FORMS = ("M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (e.g. 90 for 90 minutes, 48:00:00, "
                  "2-00), or seconds as 5400s")
# An array task's JobID is ``14_0``: JobIDRaw and %A are its own ID. JobIDRaw and Timelimit last:
# older recordings print fewer. Timelimit: status tells a link warned by --warn after its end.
SACCT_FIELDS = "JobID,State,ElapsedRaw,Submit,Start,End,ExitCode,NodeList,JobIDRaw,Timelimit"
SQUEUE_FORMAT = "%A|%T|%M|%S|%l|%E|%r"  # JobID|State|elapsed|start|limit|dependency|reason
HIDDEN_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))  # visible() escapes
UNKNOWN_TIMES = ("", "Unknown", "None", "N/A", "(null)")  # Slurm's ways to say "no time"
UNKNOWN_NODES = UNKNOWN_TIMES + ("None assigned",)  # and "no node list" (never given one)


class StateError(Exception):
    """An expected failure: bad input, corrupt state, Slurm refusing. One line for the user."""


class Refused(StateError):
    """A planted file: a symlink, a FIFO or directory, or one someone else may write."""


class Missing(StateError):
    """No such file: told by the failed open itself (a look afterwards races a new writer)."""


class Copied(StateError):
    """A run directory copied from the chain in ``home``: its files name that chain's jobs."""

    def __init__(self, run_dir, home):
        self.home = home
        StateError.__init__(self, "%s is a copy of the chain in %s: its files name that chain's "
                            "jobs" % (run_dir, home))


class LostEvents(StateError):
    """The events file cannot be read: that costs notifications, not the chain (journal_event)."""


def record_type(name, fields, doc, *defaults):
    """A namedtuple with a docstring; ``defaults``: of its last fields (3.6 has no defaults=)."""
    kind = collections.namedtuple(name, fields)
    kind.__doc__, kind.__new__.__defaults__ = doc, defaults or None
    return kind


Decision = record_type("Decision", "action retries reason",
                       "What a job does: action (one of ACTIONS), updated retries, and why.")
Job = record_type("Job", "job_id state elapsed start end time_limit restarts predecessor submit "
                  "reason exit_code nodes", 'A job as Slurm shows it: state "CANCELLED by 0", '
                  'seconds, times, ExitCode "75:0".', 0, *(None,) * 9)
RECORD_FIELDS = tuple((
    "job cluster predecessor predecessor_state predecessor_elapsed predecessor_exit_code source "
    "action cause reason walltime retries max_retries max_walltime settings_from link successor "
    "successor_error successor_retries guard guard_error guarded_by dead_successors node_deaths "
    "time_limit warn budget_dir notify reserved next phase time").split())
Record = record_type("Record", RECORD_FIELDS, "The journal: the last decision in a run directory "
                     "(docs/state-files.md).", *(None,) * len(RECORD_FIELDS))
Event = record_type("Event", "event job link reason time", "A chain event, notified once; its "
                    "job: the last link that ran (resumed: the new).")
NextLink = record_type("NextLink", "script sbatch_args script_args job_name workdir", "How a "
                       "link's successor is queued.", (), (), None, None)
Budget = record_type("Budget", "cap settled reservations settled_jobs cluster", "Shared walltime "
                     "(s): settled_jobs ended (each once); reservations may still run.", None)
SlurmResult = collections.namedtuple("SlurmResult", "returncode stdout stderr")
ControllerAnswer = record_type("ControllerAnswer", "job error forgotten", "The controller's Job "
                               "or None; forgotten (MinJobAge) or hung: asking again cannot help.")
Observation = record_type("Observation", "job source note", "What the lookup found: the "
                          "predecessor's Job (state NOT_VISIBLE when not found), its command.")
Snapshot = record_type("Snapshot", "walltime retries last_job record cancelled", "The run "
                       "directory read once, locked; cancelled: the mark's text; None: missing.")
Holder = record_type("Holder", "cluster job host pid time token", "Who holds a file lock (its JSON "
                     "content): job None outside a job, time in epoch seconds.")
Outcome = record_type("Outcome", "status record observation warnings event", "What a link did; "
                      "event: the one it journaled (None: none, or journaled before).", None)
LinkOptions = record_type("LinkOptions", "settings next_link now budget_dir notify warn", "What "
                          "the prologue's command line gives a link (run_link's arguments).")


class Chain(collections.namedtuple("Chain", "store jobs record submitted cancelled walltime "
                                            "retries problems events unread")):
    """A run directory's chain (read_chain): ``record`` never None (first_job_record), ``submitted``
    {} without a submit record, ``problems`` the StateErrors of the files that cannot be read,
    ``unread`` the fields they left None or empty (a counter then is unknown, not 0)."""

    def candidates(self):  # job IDs that may still be queued or running
        ids = self.jobs[-2:] + [self.record.job, self.record.successor]
        return sorted(set(job for job in ids if job and is_job_id(str(job))), key=int)

    def to_cancel(self):  # the jobs that may be queued and the guards: nothing of it stays
        guards = [job for job in (self.record.guard, self.record.guarded_by) if job]
        return sorted(set(self.candidates() + guards), key=int)

    def guard(self):
        """The successor's guard, or the running link's whose successor is not queued, or None."""
        record = self.record
        return record.guard or (record.action in WORK_ACTIONS and not record.successor and
                                record.guarded_by) or None

    def whole(self):  # the chain, or the StateError of its first unreadable file (events aside)
        for problem in self.problems:
            if not isinstance(problem, LostEvents):
                raise problem
        return self


def first_job_record(submitted):
    """Submit's record read as the journal of a first job that has not run (None: none)."""
    if not submitted:
        return None
    return Record(successor=submitted.get("first_job"), guard=submitted.get("guard"),
                  next={name: submitted.get(name) for name in NextLink._fields},
                  **{name: submitted.get(name) for name in (
                      "cluster", "max_retries", "max_walltime", "budget_dir", "notify", "warn")})


def read_chain(store):
    """The Chain in store's directory, each file read once (an unreadable one reads as missing)."""
    values, problems, unread = {}, [], []
    for key, read in (("jobs", store.chain_jobs), ("record", store.read_record),
                      ("submitted", store.read_submitted), ("cancelled", store.read_cancelled),
                      ("walltime", lambda: store.read_counter(WALLTIME_FILE)),
                      ("retries", lambda: store.read_counter(RETRIES_FILE)),
                      ("events", store.read_events)):
        try:
            values[key] = read()
        except StateError as error:
            values[key] = [] if key in ("jobs", "events") else None
            unread.append(key)
            problems.append(LostEvents(error) if key == "events" else  # without the frames:
                            error.with_traceback(None))  # they hold what was read
    submitted = values["submitted"] = values["submitted"] or {}
    record = values["record"] or first_job_record(submitted) or Record()
    values["record"] = record._replace(cluster=record.cluster or submitted.get("cluster"))
    return Chain(store, problems=problems, unread=tuple(unread), **values)


# ---------------------------------------------------------------------------
# 2. Slurm: the one seam every command goes through, and the layer bound to a cluster
# ---------------------------------------------------------------------------


def slurm_environment(dropped=(), **added):
    """This process's environment without the allocation's and ``dropped``; with ``added``."""
    prefixes = ("SLURM_", "SACCT_", "SQUEUE_", "SALLOC_", "SRUN_", NAMED_ENV) + dropped
    return dict({name: value for name, value in os.environ.items()
                 if name == "SLURM_CONF" or not name.startswith(prefixes)}, **added)


def run_slurm(argv, timeout=None, cwd=None, environment=None):
    """Run one Slurm command with a timeout; never raises (a query's: C locale, no SBATCH_*)."""
    _checkpoint()
    return run_command(argv, timeout or command_timeout() * (
        SBATCH_TIMEOUT_FACTOR if argv[0] == "sbatch" else 1), slurm_environment(
            ("SBATCH_",), LC_ALL="C") if environment is None else environment, cwd)


def run_command(argv, timeout, environment, cwd=None):
    """Run a command in a session of its own (a timeout kills all it started); never raises."""
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd=cwd,
                                   stderr=subprocess.PIPE, start_new_session=True, env=environment)
    except OSError as error:
        return SlurmResult(127, "", "%s: %s" % (argv[0], error.strerror or error))
    with process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as error:  # Ctrl-C: in a session
            with contextlib.suppress(OSError):  # of its own it would go on (sbatch would queue
                os.killpg(process.pid, signal.SIGKILL)  # a job no one knows); or it ended
            process.wait()
            if isinstance(error, KeyboardInterrupt):
                raise
            return SlurmResult(None, "", "%s timed out after %g s" % (argv[0], timeout))
    return SlurmResult(process.returncode, stdout.decode("utf-8", "replace"),
                       stderr.decode("utf-8", "replace"))


def slurm_settings():
    """{name: value} of ``scontrol show config`` (empty if it does not answer)."""
    return parse_config(run_slurm(["scontrol", "show", "config"]).stdout)


def current_cluster():
    """The cluster this environment's Slurm commands reach (ClusterName), or None."""
    return slurm_settings().get("ClusterName")


def chunks(job_ids):
    """job_ids in lists of QUERY_CHUNK: thousands in one -j would exceed 128 KiB an argument."""
    return [list(job_ids[i:i + QUERY_CHUNK]) for i in range(0, len(job_ids), QUERY_CHUNK)]


@functools.lru_cache(maxsize=None)
def _user_name():
    """This user's name; StateError if none for the uid (26.05's squeue hides its jobs silently)."""
    import pwd
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        raise StateError("cannot ask squeue for your jobs: this node has no user name for your "
                         "uid %d" % os.getuid())


class Slurm(object):
    """One cluster's Slurm commands (None: this environment's), all through run_slurm, the seam."""

    def __init__(self, cluster=None):
        self.cluster, self.known_name = cluster, cluster

    def name(self):
        """The cluster's name, asked once per object (a sweep's tasks share one)."""
        self.known_name = self.known_name or current_cluster()
        return self.known_name

    def run(self, argv, **how):  # -M right after the command's name
        return run_slurm(argv[:1] + ["-M", self.cluster] * bool(self.cluster) + argv[1:], **how)

    def error(self, argv):  # a command whose output does not matter: its error text or None
        result = self.run(argv)
        return None if result.returncode == 0 else last_line(result.stderr)

    def jobs(self, job_ids):
        """The Jobs squeue shows of job_ids; StateError if squeue fails."""
        found = []
        for chunk in chunks(job_ids):
            result = self.run(["squeue", "-h", "-o", SQUEUE_FORMAT, "-j", ",".join(chunk)])
            if result.returncode != 0 and "Invalid job id" not in result.stderr:
                raise StateError("squeue failed: %s" % last_line(result.stderr))
            wanted = set(chunk)
            found += [job for job in parse_squeue(result.stdout) if job.job_id in wanted]
        return found

    def accounting(self, job_ids, timeout=None):
        """Ask accounting: ({job ID: Job summarizing every run}, the last error text or None)."""
        found, error = {}, None
        for chunk in chunks(job_ids):
            result = self.run(["sacct", "-j", ",".join(chunk), "-X", "-D", "-P", "-n", "-o",
                               SACCT_FIELDS], timeout=timeout)
            if result.returncode != 0:
                error = last_line(result.stderr)
            found.update((job_id, summarize_sacct(records)) for job_id, records in parse_sacct(
                result.stdout if result.returncode == 0 else "").items())
        return found, error

    def controller(self, job_id, timeout=None):
        return controller_answer(self.run(["scontrol", "show", "job", "-o", job_id],
                                          timeout=timeout))

    def final(self, job_id):
        """How a job ended (or where it is): the controller's Job, else accounting's, or None."""
        return self.controller(job_id).job or self.accounting([job_id])[0].get(job_id)

    def mine(self, fields):
        """``squeue -h -o FIELDS`` of this user's pending jobs; StateError if squeue fails (22.05
        says Invalid user of a name it cannot resolve, but exits 0: never read as "none")."""
        result = self.run(["squeue", "-h", "-u", _user_name(), "-t", "PENDING", "-o", fields])
        if result.returncode != 0 or "Invalid user" in result.stderr:
            raise StateError("squeue failed: %s" % last_line(result.stderr))
        return result.stdout

    def dependents(self):
        """{predecessor ID: [pending job IDs]} of this user's afternotok jobs."""
        dependents = {}
        for job in parse_squeue(self.mine(SQUEUE_FORMAT)):
            if job.predecessor:
                dependents.setdefault(job.predecessor, []).append(job.job_id)
        return dependents

    def submit(self, options, script, script_args, cwd=None, named=False):
        """(job ID, the cluster sbatch named or None), the user's SBATCH_* applied; StateError."""
        options = list(options) + (named_export(options, script) if named else [])
        environment = slurm_environment(**{NAMED_ENV: "1"} if named else {})
        for name in REFUSED_SBATCH_ENV:  # submit and resume refuse them; a link drops them (a
            environment.pop(name, None)  # rendered array's tasks inherit SBATCH_ARRAY_INX)
        return sbatch_answer(self.run(
            ["sbatch", "--parsable"] + options + [script] + list(script_args),
            cwd=cwd if cwd and os.access(cwd, os.X_OK) and os.path.isdir(cwd) else None,
            environment=environment))

    def submit_held(self, options, script, script_args, cwd=None, named=False):
        """submit() of a held job, all or nothing: when sbatch fails (it may have queued the job
        all the same), a held job running ``script`` is cancelled; StateError says what is left."""
        try:
            return self.submit(options, script, script_args, cwd, named)
        except (StateError, KeyboardInterrupt) as failure:  # Ctrl-C too: the job may exist
            error = str(failure) or "interrupted"
            with interrupts_held():  # a second Ctrl-C waits for the cleanup
                try:
                    created = parse_held_by_script(self.mine("%A|%o|%r"), os.path.abspath(script))
                except StateError as unknown:
                    raise StateError("%s; squeue cannot tell whether it created a held job "
                                     "anyway (%s): scancel any held job of yours running %s"
                                     % (error, unknown, script))
                failed = sorted(set((created and self.cancel(created) or {}).values()))
            if failed:
                raise StateError("%s; it created held job %s anyway, which could not be cancelled "
                                 "(%s): scancel it" % (error, " ".join(created), "; ".join(failed)))
            raise StateError("%s%s" % (error, "; the held job %s it created anyway was cancelled"
                                       % " ".join(created) if created else ""))

    def cancel(self, job_ids):
        """{job ID: error said of it} of cancelling this user's jobs (root says so: a chain's files
        never cancel another's job); a line that names none of the jobs is said of them all."""
        mine, said = ["--user=root"] if os.geteuid() == 0 else [], {}
        for chunk in chunks(job_ids):
            result = self.run(["scancel"] + mine + chunk)
            for line in (result.stderr.strip() or "no output").splitlines() * (
                    result.returncode != 0):  # None: it timed out, and may have cancelled nothing
                if "Invalid job id specified" in line:  # it ended since squeue listed it: gone
                    continue
                named = set(word.strip(":,.") for word in line.split()) & set(chunk)
                said.update((job, line.strip()) for job in named or chunk)
        return said

    def release(self, job_id):
        """Release a job queued held; StateError saying how to do it by hand if Slurm refuses."""
        error = self.error(["scontrol", "release", job_id])
        if error:
            raise StateError("job %s was queued held and could not be released (%s): run "
                             "scontrol %srelease %s" % (job_id, error, "-M %s " % self.cluster
                                                        if self.cluster else "", job_id))


SLURM = Slurm()  # this environment's cluster


# ---------------------------------------------------------------------------
# 3. A link starts: main, the in-job step's words, the prologue step, who the link is, its
#    predecessor asked at once (run_link lists its steps in order; the sections below follow it)
# ---------------------------------------------------------------------------

COMMAND = "resumable-chain"  # as main() found it run; what messages say is printed so (as_run)


def main(argv=None):
    """Run the command line; return the exit status."""
    global COMMAND
    words = getattr(sys, "argv", None) or [""]  # an embedding interpreter may have none
    argv, COMMAND = words[1:] if argv is None else argv, command_name(words[0])
    try:
        if not isinstance(argv, (list, tuple)) or not all(isinstance(word, str) for word in argv):
            raise ValueError("argv must be a list of strings, got %r" % (argv,))  # a driver's
        argv = list(argv)
        if not {"-h", "--help", "--version"}.intersection(argv):
            check_tuning()
        return run_step(argv[0], argv[1:]) if argv[:1] and argv[0] in STEPS else \
            run_user_command(argv)
    except SystemExit as exit_request:  # --help and --version
        return exit_request.code if isinstance(exit_request.code, int) else 0
    except (StateError, ValueError) as error:
        _log("error: %s" % str(error).replace("\n", "\\n"))  # one line, whatever a path holds
        return EXIT_USAGE
    except KeyboardInterrupt:
        _log("interrupted")
        return 130


def command_name(argv0):
    """The console script by name when PATH finds it; else this file run by python3 (a file
    copied as the Quick start says is on no PATH), by its absolute path, quoted for the shell."""
    if os.path.basename(argv0) != "resumable-chain":  # by path, python3 -m, a link's python -c
        return "python3 " + shell_quote(module_path())
    import shutil  # not before: it imports zlib, bz2 and lzma, 2 ms of every link
    found = shutil.which("resumable-chain")
    same = found and os.path.realpath(found) == os.path.realpath(argv0)
    return "resumable-chain" if same else shell_quote(os.path.abspath(argv0))


def module_path():
    return os.path.realpath(__file__)


def shell_quote(text):
    """shlex.quote, without importing shlex in the job."""
    safe = text and all(char in SHELL_SAFE for char in text)
    return text if safe else "'" + text.replace("'", "'\"'\"'") + "'"


def run_step(step, argv):
    function, usage = STEPS[step]
    if argv[:1] in (["-h"], ["--help"]):
        _write("usage: resumable-chain %s %s\n\n%s\n" % (
            step, usage, (function.__doc__ or "").replace("\n    ", "\n").strip()))
        return 0
    positional, options = read_step_words(step, argv)
    return function(*positional, **options)


def read_step_words(step, argv):
    """(positional words, {keyword: value}) of an in-job step's words, read as STEPS says."""
    usage = STEPS[step][1]
    before, _, after = usage.partition(" [-- ")
    wanted = usage_options(before)
    named = [word.strip("[]") for word in before.split() if not word.lstrip("[").startswith("-")]
    dashes = argv.index("--") if after and "--" in argv else len(argv)
    positional, options = [], {after.strip("]. ").lower(): argv[dashes + 1:]} if after else {}
    for word in argv[:dashes]:
        name, equals, value = word.partition("=")
        keyword, metavar = name[2:].replace("-", "_"), wanted.get(name)
        if not word.startswith("-"):
            positional.append(word)
        elif metavar is None or bool(equals) != bool(metavar):
            raise ValueError("%s: unknown option %r (a link runs this by itself: %s)"
                             % (step, word, usage))
        elif metavar.endswith("..."):
            options.setdefault(keyword + "s", []).append(value)
        else:
            options[keyword] = OPTIONS.get(name, (str,))[0](value) if metavar else True
    several = named[-1].endswith("...")
    missing = [name for name in wanted if "[" + name not in usage
               and name[2:].replace("-", "_") not in options]
    if missing or len(positional) < len(named) - several or (
            not several and len(positional) > len(named)):
        raise ValueError("%s: usage: resumable-chain %s %s (a link runs this by itself)"
                         % (step, step, usage))
    return positional, options


def usage_options(usage):
    """{--NAME: its metavar, "" for a flag}, in order, of a usage line's options."""
    words, options = usage.split(), collections.OrderedDict()
    for index, word in enumerate(words):
        name, _, metavar = word.strip("[]").partition("=")
        if name.startswith("--") and name != "--":
            if word.startswith("[") and not word.endswith("]"):
                metavar = words[index + 1].rstrip("]")
            options[name] = metavar
    return options


def retries_from_text(text):
    """A command line's max_retries: digits only, then the one rule of check_max_retries."""
    return check_max_retries(int(text) if is_digits(text, 13) else text)


def is_digits(text, longest=None):
    """Whether text (str or bytes) is 1 to ``longest`` ASCII digits (str.isdigit takes '²')."""
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    return (isinstance(text, str) and 0 < len(text) <= (longest or len(text))
            and all("0" <= char <= "9" for char in text))


def check_max_retries(value, name="max_retries"):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRIES_LIMIT:
        raise ValueError("%s must be a whole number from 0 to %d, got %r"
                         % (name, MAX_RETRIES_LIMIT, value))
    return value


def prologue_command(run_dir, *, script, max_retries=DEFAULT_MAX_RETRIES, max_walltime=None,
                     sbatch_args=(), script_args=(), budget_dir=None, **notify_and_warn):
    """The in-job step that the rendered prologue runs (see render): decide from the
    predecessor's final state, record it in DIR and queue the successor. Prints the
    RESUMABLE_CHAIN_* exports for the work on stdout. Exit 0: run the work; 3: the chain is done
    (exit 0 without work); 1: max_retries exceeded; 2: bad input or state.

    example (inside a batch job):
      python3 resumable_chain.py prologue --max-retries=3 --script="$0" runs/gpqa -- "$@"
    """
    run_dir = task_run_dir(run_dir, os.environ)
    task = os.environ.get("SLURM_ARRAY_TASK_ID")  # an array task's links: one-task arrays
    if task and not is_digits(task, 9):
        raise StateError("malformed SLURM_ARRAY_TASK_ID %r: not a task ID; nothing done" % task)
    sbatch_args = chain_sbatch_args(sbatch_args) + (["--array=" + task] if task else [])
    next_link = NextLink(script, sbatch_args, script_args, os.environ.get("SLURM_JOB_NAME"),
                         os.environ.get("SLURM_SUBMIT_DIR") or os.getcwd())  # every link's
    outcome = run_link(run_dir, Settings(max_retries, max_walltime), next_link, os.environ,
                       budget_dir=budget_dir and os.path.abspath(budget_dir), **notify_and_warn)
    _log(*outcome.warnings)
    if outcome.status == EXIT_WORK:
        outcome, start, limit = fit_own_limit(outcome, os.environ)
    _log(describe_link(outcome))
    if outcome.event and outcome.record.notify:  # the lock is released: it may take 30 s
        _log(notify(outcome.record.notify, outcome.event, run_dir))
    if outcome.status == EXIT_WORK:
        end = link_end(start, limit, link_caps(outcome.record))
        if outcome.record.warn:
            _log(start_warner(outcome.record.warn, end, limit, os.environ))
        start_while_working(run_dir, outcome)
        exports = link_exports(outcome.record, run_dir, end)
        if outcome.observation and outcome.observation.source == "journal":  # a run again of
            # a job whose work may have run (a requeue): its own, even a first job's
            exports[EXPORT_PREFIX + "RESUMING"] = "1"
        _write("unset %s\n" % NAMED_ENV + "".join(  # not passed on to jobs the work queues
            "export %s=%s\n" % (name, shell_quote(value)) for name, value in exports.items()))
    return outcome.status


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


def command_timeout():
    return _positive_env_number(COMMAND_TIMEOUT_ENV, DEFAULT_COMMAND_TIMEOUT)


def check_tuning():
    """A bad RESUMABLE_CHAIN_* tuning variable, refused by every command: met by the first link,
    not a later guard, and never shown by status as a state file it cannot read."""
    lookup_window(), command_timeout(), _positive_env_number(VIEW_WAIT_ENV, 0, True)
    if os.environ.get(LOCK_ENV):  # lock_kind's own check: set, it reads no mounts
        lock_kind(os.sep)


def lookup_window():
    return _positive_env_number(LOOKUP_SECONDS_ENV, DEFAULT_LOOKUP_SECONDS, allow_zero=True)


def view_wait(directory):
    """Seconds a view of ``directory`` may lag: VIEW_WAIT_ENV if set, else none on a local
    filesystem (a guard there must act before a fault ends it too), else VIEW_WAIT_SECONDS."""
    mount = mount_of(directory)
    local = mount and mount[1] in LOCAL_FILESYSTEMS
    return _positive_env_number(VIEW_WAIT_ENV, 0 if local else VIEW_WAIT_SECONDS, allow_zero=True)


def chain_sbatch_args(sbatch_args, allowed=()):
    """sbatch arguments, long names in full, a word sbatch may not know as written (a running
    chain must not stop over a table); ValueError for REFUSED_SBATCH_OPTIONS but ``allowed``."""
    if not isinstance(sbatch_args, (list, tuple)) or len(sbatch_args) > MAX_WORDS:
        raise ValueError("sbatch_args must be a list of at most %d arguments, not %.60r"
                         % (MAX_WORDS, sbatch_args))
    groups = option_groups(sbatch_args)
    for name, words, _ in groups:
        if name in REFUSED_SBATCH_OPTIONS and name not in allowed:
            raise ValueError("sbatch option %r is not allowed in a chain: %s"
                             % (words[0], REFUSED_SBATCH_OPTIONS[name]))
    return [word for _, words, _ in groups for word in words]


def check_sbatch_args(sbatch_args, allowed=()):
    """chain_sbatch_args() of words sbatch takes: ValueError for an unknown, ambiguous or valueless
    option, a stray word (said first) or a --time it cannot read (every successor would fail)."""
    words = chain_sbatch_args(sbatch_args, REFUSED_SBATCH_OPTIONS)
    known = SBATCH_VALUE_OPTIONS | SBATCH_OTHER_OPTIONS
    for name, _, problem in option_groups(words):
        typo = not problem and name not in known and sorted(
            option for option in known if option[:2] == "--" and one_typo_apart(name, option))
        ours = not (problem or typo) and name not in known and own_option(name)  # after --
        if problem or typo or ours:  # a site plugin's --name=value, unless a typo of sbatch's own
            raise ValueError(problem or ours or "unknown option %s (did you mean %s?): sbatch "
                             "would refuse it in every successor (a site plugin's option of that "
                             "name goes in the script's #SBATCH lines)" % (name, typo[0]))
    chain_sbatch_args(words, allowed)
    for name in ("--time", "--time-min"):
        for value in option_values(sbatch_args, name):  # parse_duration reads D- as D days
            if value.upper() not in ("-1", "INFINITE", "UNLIMITED") and parse_duration(
                    value) is None:
                raise ValueError("invalid %s %r: sbatch takes M, M:S, H:M:S, D-H, D-H:M, D-H:M:S "
                                 "or UNLIMITED (e.g. %s=4:00:00)" % (name, value, name))
    return words


def own_option(name):
    """The error for resumable-chain's option, or one a letter off, among sbatch's; or None."""
    ours = [option for option in OPTIONS if option[:2] == "--" and (
        option == name or one_typo_apart(name, option))]
    if not ours:
        return None
    takers = [command for command, spec in USER_COMMANDS.items()
              if ours[0] in usage_options(spec.usage)]
    whose = ", ".join(takers[:-1]) + " and " + takers[-1] if takers[1:] else "".join(takers)
    return ("unknown option %s: sbatch has no such option, resumable-chain has %s (%s); sbatch "
            "would refuse it in every successor" % (name, ours[0], "%s take%s it" % (
                whose, "s"[len(takers) > 1:]) if takers else "its in-job step's"))


def one_typo_apart(word, known):
    """Whether ``word`` is ``known`` with one letter changed, added or dropped, or two swapped."""
    at = next((i for i, pair in enumerate(zip(word, known)) if pair[0] != pair[1]),
              min(len(word), len(known)))  # the first letter that differs
    return word != known and known in (
        word[:at] + known[at:at + 1] + word[at + 1:], word[:at] + word[at + 1:],
        word[:at] + known[at:at + 1] + word[at:], word[:at] + word[at + 1:at + 2] + word[at:at + 1]
        + word[at + 2:])


def option_groups(arguments):
    """sbatch arguments as [(long name, its words, why sbatch refuses them or None)]; a word that
    is no option sbatch knows (unknown, ambiguous, stray) names itself."""
    groups, value_next = [], False
    for argument in arguments:
        if not isinstance(argument, str) or "\0" in argument:
            raise ValueError("sbatch argument %r is not a string" % (argument,))
        if value_next:  # the value of the option before
            groups[-1][1].append(argument)
            value_next = False
            continue
        name, spelled, problem = argument.partition("=")[0], argument, None
        try:
            if not argument.startswith("-") or argument in ("-", "--"):
                raise ValueError("sbatch argument %r is not an option (or a value after one)"
                                 % argument)
            name, spelled, value_next = resolve_option(argument)
        except ValueError as error:
            problem = str(error)
        groups.append((SBATCH_SHORT_NAMES.get(name, name), [spelled], problem))
    if value_next:
        groups[-1] = groups[-1][:2] + ("sbatch option %r needs a value" % groups[-1][1][0],)
    return groups


class Settings(dict):
    """A ``resumable:`` setting as parse_resumable validated it: a dict to unpack into
    render_prologue (which checks what a driver built itself), or attributes."""

    __slots__ = ()
    KEYS = ("max_retries", "max_walltime")  # the only keys a resumable: mapping may have

    def __init__(self, max_retries=DEFAULT_MAX_RETRIES, max_walltime=None):
        dict.__init__(self, max_retries=max_retries, max_walltime=max_walltime)

    max_retries = property(lambda self: self["max_retries"])
    max_walltime = property(lambda self: self["max_walltime"])


def run_link(run_dir, settings, next_link, environ, *, now=time.time, budget_dir=None,
             notify=None, warn=None, lookup=None):
    """Everything a job's prologue does, its steps in order (defined below in that order);
    ``lookup``: the pipe the controller's answer, asked as Python started, comes on."""
    job_id, predecessor_id = identify(environ)
    asked, window = time.monotonic(), lookup_window()
    answer = predecessor_id and lookup and _read_lookup(
        lookup, predecessor_id, first_lookup_timeout(window))
    window = max(window - (time.monotonic() - asked), 0)  # one window, as before the pipe
    options = LinkOptions(settings, next_link, now, budget_dir, notify, warn)
    store = open_run_dir(run_dir, predecessor_id)
    with store.locked():
        warnings = list(store.lock_note)
        snapshot, cluster = find_place(store, job_id, predecessor_id, environ, warnings)
        if snapshot.record and snapshot.record.job == job_id:
            return _run_again(store, snapshot, next_link, environ, warnings)
        snapshot, predecessor_id = settle_place(store, snapshot, job_id, predecessor_id, warnings)
        if predecessor_id is None:
            snapshot = _start_chain(store, snapshot, job_id, next_link, warnings, cluster)
        observation = predecessor_id and observe_predecessor(predecessor_id, window, answer=answer)
        record, own = decide_link(store, snapshot, (job_id, predecessor_id, cluster),
                                  observation or None, options, warnings)
        store.write_record(record)  # the journal first: a kill after it is rolled forward
        store.apply(snapshot, record)
        return _finish_link(store, record, observation or None, next_link, environ, warnings,
                            own=own)


def _read_lookup(lookup, job_id, timeout):
    """The SlurmResult of the prologue's lookup (its PID, then what scontrol printed) once it
    ended, killed after ``timeout`` (scontrol starts no child); None: none about ``job_id``."""
    deadline, text = time.monotonic() + timeout, b""
    with contextlib.suppress(OSError, ValueError), open(lookup, "rb", 0) as pipe:
        while select.select([pipe], [], [], max(deadline - time.monotonic(), 0))[0]:
            chunk = pipe.read(1 << 16)
            if not chunk:  # scontrol -o: a line per job; errors are the other lines
                lines = text.decode("utf-8", "replace").splitlines(True)[1:]
                out = "".join(line for line in lines if line.startswith("JobId="))
                job = parse_scontrol(out)
                if lines and (job.job_id == job_id if job else not out):
                    return SlurmResult(0, out, "") if out else SlurmResult(1, "", "".join(lines))
                return None
            text += chunk
        os.kill(int(text.partition(b"\n")[0]), signal.SIGKILL)
        return SlurmResult(None, "", "scontrol timed out after %g s" % timeout)


def scontrol_fields(text):
    """{name: value} of the first job ``scontrol show job -o`` prints (an array's tasks follow);
    a name's last is real."""
    words = (word.partition("=") for word in (text or "").split("\nJobId=")[0].split())
    return {name: value for name, _, value in words if value}


def slurm_exit_code(value):
    """value if it is Slurm's ExitCode (``"75:0"``, ``"75"`` or 0 to 255), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= 255 else None
    status, colon, signal_number = value.strip().partition(":") if isinstance(
        value, str) else ("", "", "")
    return value if is_digits(status, 3) and int(status) <= 255 and (
        not colon or is_digits(signal_number, 3)) else None


def parse_scontrol(text):
    """The Job ``scontrol show job -o`` describes, or None; one that never started has run 0 s
    (22.05 shows a bogus RunTime for a job cancelled by its dependency)."""
    fields = scontrol_fields(text)
    if not fields.get("JobState"):
        return None
    start = _known(fields.get("StartTime"))
    never_started = "StartTime" in fields and start is None
    restarts = fields.get("Restarts", "")
    return Job(fields.get("JobId", ""), fields["JobState"],
               0 if never_started else parse_duration(fields.get("RunTime")) or 0,
               start=start, end=_known(fields.get("EndTime")),
               exit_code=slurm_exit_code(fields.get("ExitCode")),
               time_limit=parse_duration(fields.get("TimeLimit")),
               restarts=int(restarts) if is_digits(restarts, 9) else None,
               nodes=_known(fields.get("NodeList"), UNKNOWN_NODES))


def _known(text, unknown=UNKNOWN_TIMES):
    text = (text or "").strip()
    return None if text in unknown else text


def parse_duration(text):
    """Seconds of a Slurm duration (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; zero allowed), or None."""
    if not isinstance(text, str):
        return None
    days, dash, clock = text.strip().rpartition("-")
    parts = (clock if clock or not dash else "0").split(":")  # "1-" is a day, as sbatch has it
    if dash and not is_digits(days, 18) or len(parts) > 3 or not all(  # longer: no duration
            is_digits(part, 18) for part in parts):
        return None
    # M and M:S start at minutes; D-H... and H:M:S at hours
    numbers = [0] * (not dash and len(parts) < 3) + [int(part) for part in parts] + [0, 0]
    hours, minutes, seconds = numbers[:3]
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds


def identify(environ):
    """(this job's ID, its predecessor's ID or None) from the job's environment."""
    job_id = environ.get("SLURM_JOB_ID")
    if not job_id:
        raise StateError("not inside a Slurm batch job (SLURM_JOB_ID is not set); nothing done")
    job_id = parse_job_id(job_id, "SLURM_JOB_ID")
    return job_id, parse_dependency(environ.get("SLURM_JOB_DEPENDENCY"))


def parse_job_id(text, what="job ID"):
    if is_job_id(text):
        return text
    raise ValueError("malformed %s %r: expected a plain number such as 12345" % (what, text))


def is_job_id(text):
    return is_digits(text, 10) and text[0] != "0" and int(text) < 2 ** 32


def parse_dependency(text):
    """Return the predecessor ID named by ``afternotok:<id>`` in SLURM_JOB_DEPENDENCY, or None."""
    clauses = (part.strip().partition(":") for part in (text or "").replace("?", ",").split(","))
    # squeue: 14_* (an array's ID: its tasks); 14_2 (the task keeping the array's ID)
    predecessors = [parse_job_id(job_id.split("(")[0].strip().split("_")[0],
                                 "afternotok job ID in SLURM_JOB_DEPENDENCY")
                    for kind, _, ids in clauses if kind.strip().lower() == "afternotok"
                    for job_id in ids.split(":")]
    if len(set(predecessors)) > 1:
        raise ValueError("SLURM_JOB_DEPENDENCY %r names several afternotok jobs; a chain link "
                         "has exactly one predecessor" % (text,))
    return predecessors[0] if predecessors else None


def first_lookup_timeout(window):
    return min(command_timeout(), max(window, MIN_COMMAND_TIMEOUT))


_checkpoints_passed = [0]  # how many checkpoints this process passed (crash-injection tests)


# ---------------------------------------------------------------------------
# 4. The run directory: its store, files read and checked, its path and its lock; the link's
#    place in its chain
# ---------------------------------------------------------------------------


def open_run_dir(run_dir, predecessor_id):
    """The run directory's store: a first job makes the directory, a later link needs it."""
    if predecessor_id is None:
        make_run_dir(run_dir)
    elif not os.path.isdir(run_dir):
        raise StateError("run directory %s is missing: the chain's state is lost; no work, no "
                         "successor (resubmit to start a new chain)" % run_dir)
    return chain_store(run_dir)


def chain_store(directory):
    """The StateStore of a run or budget directory, able to break a lock an ended job held."""
    # absolute as make_run_dir made it (rel/../run: no rel needed), a driver's pathlib.Path too
    return StateStore(os.path.abspath(directory), job_over=job_over)


def load_json(text):
    """``json.loads`` for the state files, refusing NaN and Infinity (JSON has no such values)."""
    def refuse(name):
        raise ValueError("%s is not JSON" % name)
    return json.loads(text, parse_constant=refuse)


def record_from_json(data):  # unknown keys ignored
    return Record(**_checked(data, RECORD_CHECKS, RECORD_FIELDS))


def _checked(data, checks, fields):
    """{field: value} of a JSON object whose fields pass their checks; ValueError names one."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    values = {name: data.get(name) for name in fields}
    for name, value in values.items():
        if not checks[name](value):
            raise ValueError("field %r cannot be %s" % (name, json.dumps(value)[:40]))
    return values


def _job(value):
    return value is None or (isinstance(value, str) and is_job_id(value))


def _word(value):  # a command-line word or a path: the command line cannot hold a NUL
    return _text(value) and "\0" not in (value or "")


def _absolute(value):  # every path a chain records is: a relative one reads from the reader's cwd
    return _word(value) and (value is None or os.path.isabs(value))


def _cluster(value):  # Slurm's ClusterName, which -M takes: not an option, nor "a,b" (two)
    return _word(value) and (value is None or value.split() == [value] and value[0] != "-"
                             and "," not in value)


def _text(value):
    return value is None or isinstance(value, str)


def _count(value, most=MAX_COUNTER):  # as the counter files
    return value is None or (type(value) is int and 0 <= value <= most)


_limit = functools.partial(_count, most=MAX_TIME_LIMIT)  # a Slurm time limit
_max_retries = functools.partial(_count, most=MAX_RETRIES_LIMIT)  # as check_max_retries


def is_words(words):  # a command line's (none holds a NUL), at most MAX_WORDS
    return isinstance(words, (list, tuple)) and len(words) <= MAX_WORDS and all(
        isinstance(word, str) and "\0" not in word for word in words)


def _one_of(*allowed):
    return lambda value: value in allowed


def _warn_ok(value):
    with contextlib.suppress(ValueError):
        return check_warn(value) == value
    return False


def _next_link_ok(value):
    """What comes back from the journal is checked as the command line is: the sbatch options
    through the same validator (a planted --wrap or --export=...BASH_ENV is refused)."""
    if value is None:
        return True
    if not isinstance(value, dict) or not all(_word(value.get(name)) for name in (
            "script", "job_name")) or not SUBMIT_CHECKS["workdir"](value.get("workdir")):
        return False
    lists = [value.get(name) or [] for name in ("sbatch_args", "script_args")]
    if not all(isinstance(words, list) and is_words(words) for words in lists):
        return False
    with contextlib.suppress(ValueError):  # an array task's links: --array=<task>, no more
        chain_sbatch_args(without_options(lists[0], ("--array",)))
        return all(is_digits(task, 9) for task in option_values(lists[0], "--array"))
    return False


RECORD_CHECKS = {  # every journal field's test (True: the value may be used as it is)
    "job": lambda value: _job(value) and value is not None, "cluster": _cluster,
    "predecessor": _job, "predecessor_state": _text, "predecessor_elapsed": _count,
    "predecessor_exit_code": lambda value: value is None or type(value) is int,
    "source": _text, "action": _one_of(*ACTIONS), "cause": _one_of(None, *STOP_CAUSES),
    "reason": _text, "walltime": _count, "retries": _count, "max_retries": _max_retries,
    "max_walltime": _limit, "settings_from": _one_of(None, "prologue", "resume"),
    "link": _count, "successor": _job, "successor_error": _text, "successor_retries": _count,
    "guard": _job, "guard_error": _text, "guarded_by": _job, "dead_successors": _count,
    "node_deaths": _count, "time_limit": _limit, "budget_dir": _absolute, "warn": _warn_ok,
    "reserved": _count, "notify": lambda value: value is True or _word(value),
    "next": _next_link_ok, "phase": _one_of(None, "counted", "queued", "done"),
    "time": lambda value: value is None or (type(value) in (int, float) and 0 <= value < 1e11),
}
EVENT_CHECKS = {"event": _one_of(*EVENTS), "job": _job, "link": _count, "reason": _text,
                "time": RECORD_CHECKS["time"]}

SUBMIT_CHECKS = {  # the submit record's fields and their tests (as RECORD_CHECKS)
    "first_job": RECORD_CHECKS["job"], "cluster": _cluster, "script": _word, "original": _word,
    "sbatch_args": lambda value: _next_link_ok({"sbatch_args": value}),
    "script_args": lambda value: _next_link_ok({"script_args": value}),
    "max_retries": _max_retries, "max_walltime": _limit, "budget_dir": _absolute,
    "workdir": _absolute,  # submit's cwd, where submit_again sends a person
    "notify": RECORD_CHECKS["notify"], "warn": RECORD_CHECKS["warn"], "time": RECORD_CHECKS["time"],
    "guard": _job, "dead_first_jobs": _count, "node_deaths": _count,
    "python": lambda value: _word(value) and (value is None or value.split() == [value]
                                              or os.sep in value),
}


class StateStore(object):
    """The chain's dot-files in one run directory: every read validated, every write atomic.
    ``job_over``: see job_over(); a file lock held by an ended job on another host is broken."""

    def __init__(self, directory, job_over=None):
        self.directory, self.job_over = directory, job_over
        self.lock_note = []  # the log line of a file lock (none for the kernel's record lock)
        self.acting = False  # set by locked(): from then on every file read must be the caller's
        self.owner = None  # status: its directory's owner (one's own: refuse what resume would)
        self.notify_on_file = None  # NOTIFY_FILE as read or written ("": none), read at most once

    def path(self, name):
        return os.path.join(self.directory, name)

    def read_bytes(self, name, tail=None, most=None):
        """A state file's bytes, or None if missing: the last ``tail``, or up to ``most`` + 1."""
        path = self.path(name)
        try:
            descriptor = open_own_file(path, os.O_RDONLY,
                                       owned=self.acting or self.owner == os.geteuid())
        except Missing:
            return None
        with os.fdopen(descriptor, "rb") as handle:
            try:
                if tail is not None:
                    handle.seek(max(0, os.fstat(descriptor).st_size - tail))
                    return handle.read(tail)
                return handle.read(MAX_STATE_BYTES + 1 if most is None else most + 1)
            except OSError as error:
                raise StateError("cannot read state file %s: %s (nothing was changed)"
                                 % (path, error.strerror or error))

    def corrupt(self, name, raw, expected):
        shown = raw.decode("utf-8", "backslashreplace")
        shown = shown[:60] + "..." if len(shown) > 60 else shown
        advice = ("fix it (resume needs it; one that cannot be fixed: scancel the chain's queued "
                  "jobs, delete it, then submit --force starts anew)" if name == JOURNAL_FILE
                  else "fix or delete it")
        return StateError("corrupt state file %s: content %r is not %s; %s (nothing was changed)"
                          % (self.path(name), shown, expected, advice))

    def read_counter(self, name):
        raw = self.read_bytes(name, most=COUNTER_BYTES)
        if raw is None:
            return None
        digits = raw.strip(b" \t\n\r\x0b\x0c")
        if len(raw) > COUNTER_BYTES or not is_digits(digits, 13) or int(digits) > MAX_COUNTER:
            raise self.corrupt(name, raw, "a whole number of at most %d" % MAX_COUNTER)
        return int(digits)

    def chain_jobs(self, tail=MAX_STATE_BYTES):
        """The chain file's job IDs in its last ``tail`` bytes (the file grows for ever)."""
        raw = self.read_bytes(CHAIN_FILE, tail=tail + 1)
        if raw is None:
            return []
        # its first line may be cut; the error shows the tail read
        lines = raw.partition(b"\n")[2] if len(raw) > tail else raw
        jobs = lines.decode("ascii", "replace").split()
        words = " " + " ".join(jobs)  # checked at C speed: a planted MiB costs every status
        if not jobs or not words.replace(" ", "").isdigit() or " 0" in words or not all(
                is_job_id(job) for job in jobs if len(job) > 9):
            raise self.corrupt(CHAIN_FILE, raw, "job IDs, one per line")
        return jobs

    def read_json(self, name, what, convert):
        """``convert(the file's JSON object)``, or None if missing; corrupt if not a ``what``."""
        raw = self.read_bytes(name)
        if raw is None:
            return None
        why = "longer than %d bytes" % MAX_STATE_BYTES if len(raw) > MAX_STATE_BYTES else \
            "valid JSON, not an object of the fields this release reads"
        try:  # RecursionError: JSON nested deeper than Python's stack, never a real state file
            data = load_json(raw.decode("utf-8")) if len(raw) <= MAX_STATE_BYTES else None
            value = convert(data) if isinstance(data, dict) else None
        except (TypeError, RecursionError):
            value, why = None, "not JSON"
        except ValueError as error:  # also what a convert says: the field that is wrong
            value, why = None, str(error)
        if value is None:
            raise self.corrupt(name, raw, "a resumable_chain %s (JSON object) (%s)" % (what, why))
        if self.acting and exports_values(data):  # an earlier release wrote it 0644
            with contextlib.suppress(OSError):
                os.chmod(self.path(name), 0o600)
        return value

    def read_record(self):
        """The journal's Record, or None; under the lock its notify is the command itself."""
        record = self.read_json(JOURNAL_FILE, "journal", record_from_json)
        if record is not None and record.notify is True and self.acting:
            record = record._replace(notify=self.read_notify())
        return record

    def read_submitted(self):
        """What ``submit`` recorded: the known fields it has (older ones lack some), or None."""
        return self.read_json(SUBMIT_FILE, "submit record", lambda data: {
            name: value for name, value in _checked(data, SUBMIT_CHECKS, SUBMIT_CHECKS).items()
            if name in data})

    def read_notify(self):
        if self.notify_on_file is None:
            self.notify_on_file = self.read_json(NOTIFY_FILE, "notify command", lambda data: (
                data.get("notify") if _word(data.get("notify")) else None)) or ""
        return self.notify_on_file or None

    def write_public(self, name, data, durable=True):
        """Write a record (a dict) others may read but its secrets: a notify command goes to
        NOTIFY_FILE (mode 0600), the record says only ``true``; options that give variables
        values (--export=NAME=value, often a token) make the record the owner's alone (0600)."""
        command = data.get("notify")
        if isinstance(command, str) and self.read_notify() != command:
            self.write_text(NOTIFY_FILE, dump_json({"notify": command}) + "\n", mode=0o600)
            self.notify_on_file = command
        data = dict(data, notify=True) if isinstance(command, str) else data
        self.write_text(name, dump_json(data) + "\n", mode=0o600 if exports_values(data) else 0o644,
                        durable=durable)

    def read_events(self):  # oldest first
        return self.read_json(EVENTS_FILE, "events file", events_from_json) or []

    def add_event(self, event):
        """Whether ``event`` is new since the chain was last resumed (journaled, then notified)."""
        events = self.read_events()
        since = [index for index, old in enumerate(events) if old.event == "resumed"]
        if any(old.event == event.event and old.job == event.job
               for old in events[since[-1] + 1 if since else 0:]):
            return False
        self.write_text(EVENTS_FILE, dump_json(
            {"events": [old._asdict() for old in events + [event]]}) + "\n")
        return True

    def read_cancelled(self):  # the mark's text: when the chain was cancelled
        raw = self.read_bytes(CANCEL_FILE, most=200)
        return None if raw is None else (raw[:200].decode("utf-8", "replace").strip() or "yes")

    def snapshot(self):
        """Under the lock: read every file a writer needs, once, and roll forward the files of a
        writer killed after its journal (phase ``counted``), so every writer starts consistent."""
        return self.rolled_forward(Snapshot(
            walltime=self.read_counter(WALLTIME_FILE), retries=self.read_counter(RETRIES_FILE),
            last_job=(self.chain_jobs(tail=63) or [None])[-1],  # the chain file's tail: hot path
            record=self.read_record(), cancelled=self.read_cancelled()))

    def rolled_forward(self, snapshot):
        record = snapshot.record
        return self.apply(snapshot, record) if record and record.phase == "counted" else snapshot

    def write_text(self, name, text, mode=0o644, durable=True):
        """Replace a file atomically: temp file, fsync, rename, ``durable``: directory fsync."""
        path = self.path(name)
        temporary = "%s.tmp.%s" % (path, os.urandom(8).hex())  # a name no one can guess
        try:
            _write_new(temporary, text, mode)
            _checkpoint()
            os.replace(temporary, path)
            if durable:
                _fsync_directory(self.directory)
            _checkpoint()
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise StateError("cannot write %s: %s (old content kept)"
                             % (path, error.strerror or error))

    def write_record(self, record, durable=True):
        try:  # never a journal its next reader refuses (a job's odd SLURM_* variables)
            record_from_json(load_json(dump_json(record._asdict())))
        except ValueError as error:
            raise StateError("refusing to write the journal in %s: %s (nothing was changed)"
                             % (self.directory, error))
        self.write_public(JOURNAL_FILE, record._asdict(), durable=durable)

    def append_job(self, job_id):
        """Append a job ID with one write() so a kill leaves the old or the new file, never half."""
        try:
            descriptor = open_own_file(self.path(CHAIN_FILE), os.O_RDWR | os.O_APPEND)
            try:
                info = os.fstat(descriptor)
                newline = info.st_size and os.pread(descriptor, 1, info.st_size - 1) != b"\n"
                line = ("\n" if newline else "").encode() + job_id.encode() + b"\n"
                if info.st_nlink > 1:  # a second name (cp -al, or planted) keeps what it holds
                    return self.write_text(CHAIN_FILE, (os.pread(
                        descriptor, info.st_size, 0) + line).decode("utf-8", "surrogateescape"),
                        mode=stat.S_IMODE(info.st_mode))
                _checkpoint()
                os.write(descriptor, line)
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            _checkpoint()
        except OSError as error:
            raise StateError("cannot append to %s: %s (old content kept)"
                             % (self.path(CHAIN_FILE), error.strerror or error))

    def keep_previous(self):
        """Under the lock: an old chain's files become ``*.prev``; the paths kept."""
        paths = [self.path(name) for name in (CHAIN_FILE, WALLTIME_FILE, RETRIES_FILE, JOURNAL_FILE,
                 CANCEL_FILE, SCRIPT_COPY, NOTIFY_FILE, EVENTS_FILE, GUARD_LOG, SUBMIT_FILE)]
        old = [path for path in paths if os.path.isfile(path) and (  # an empty guard log: no
            path != self.path(GUARD_LOG) or os.path.getsize(path))]  # guard ran
        for path in paths:
            try:  # the *.prev of one chain: none left of the chain before it
                if old and path not in old:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path + PREVIOUS_SUFFIX)
                elif path in old:
                    os.replace(path, path + PREVIOUS_SUFFIX)
                    if path in (self.path(JOURNAL_FILE), self.path(SUBMIT_FILE)):  # options
                        os.chmod(path + PREVIOUS_SUFFIX, 0o600)
            except OSError as error:
                raise StateError("cannot keep %s as %s: %s" % (
                    path, PREVIOUS_SUFFIX, error.strerror or error))
        self.notify_on_file = None
        return old

    def remove(self, name):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(name))

    def apply(self, snapshot, record):
        """Write a decided Record into the files, only what differs (idempotent: roll-forward
        calls it again); the snapshot as now on disk. One directory fsync for the files renamed:
        till then the synced journal rolls them on."""
        renamed = False
        for name, before, after in ((WALLTIME_FILE, snapshot.walltime, record.walltime),
                                    (RETRIES_FILE, snapshot.retries, record.retries)):
            if before != after:
                self.write_text(name, "%d\n" % after, durable=False)
                renamed = True
        last_job = snapshot.last_job
        if record.action in WORK_ACTIONS and last_job != record.job:
            if record.action == "start" or last_job is None:
                self.write_text(CHAIN_FILE, record.job + "\n", durable=False)
                renamed = True
            else:
                self.append_job(record.job)
            last_job = record.job
        if renamed:
            _fsync_directory(self.directory)
        return snapshot._replace(walltime=record.walltime, retries=record.retries,
                                 last_job=last_job, record=record)

    def read_budget(self):
        budget = self.read_json(BUDGET_FILE, "budget", parse_budget)
        if budget is None:
            raise StateError("no shared budget in %s: create it with resumable-chain budget %s "
                             "--max-walltime T" % (self.directory, shell_quote(self.directory)))
        return budget

    @contextlib.contextmanager
    def locked(self, wait=LOCK_WAIT_SECONDS, name=LOCK_FILE):
        """Hold the directory's lock (waited for ``wait`` s): ``lockf``, and where kernel locks
        do not hold across nodes an exclusive ``<lock>.held`` file, which both kinds wait for."""
        path, held = self.path(name), self.path(name + HELD_SUFFIX)
        if path in LOCKS_HELD:  # the inner one's close would drop the outer lockf lock
            raise RuntimeError("%s is locked already by this process" % path)
        check_owned_dir(self.directory, "budget directory" if name == BUDGET_LOCK else
                        "run directory")
        kind, why = lock_kind(self.directory)
        descriptor = open_own_file(path, os.O_RDWR | os.O_CREAT, mode=0o600, what="lock file")
        self.acting = True
        token, deadline = None, time.monotonic() + wait
        try:
            while True:
                kernel = _try_lock(descriptor, path)
                if not _same_file(descriptor, path):  # replaced (_replaced): lock the new file
                    fresh = open_own_file(path, os.O_RDWR | os.O_CREAT, mode=0o600,
                                          what="lock file")
                    os.dup2(fresh, descriptor)  # and close the old one, releasing its lock
                    os.close(fresh)
                    continue
                if kernel not in ("taken", "busy") and kind == "kernel":
                    kind, why = "file", "lock calls refused here (%s)" % kernel
                if self._replaced(name, path, held, descriptor, kernel):
                    continue
                token = kernel != "busy" and self._held_free(held) and (
                    _create_held(held) if kind == "file" else "")
                if isinstance(token, str):  # "": a kernel lock, and no .held file is held
                    break
                if kernel == "taken":
                    fcntl.lockf(descriptor, fcntl.LOCK_UN)  # let the .held holder finish
                if time.monotonic() > deadline:
                    raise StateError(self._stuck(path, held, wait, descriptor))
                time.sleep(0.2)
            self.lock_note = ["lock: file (%s%s): %s" % (LOCK_FILE, HELD_SUFFIX, why)] if (
                kind == "file") else []
            LOCKS_HELD.add(path)
            yield
        finally:
            LOCKS_HELD.discard(path)
            if token:
                self._drop_held(held, token)
            os.close(descriptor)

    def _held_free(self, held):
        """Whether the ``.held`` lock file is free: a holder whose process or job ended loses it."""
        holder = self._read_holder(held)
        if holder is None:
            return True
        if holder.host == os.uname().nodename and isinstance(holder.pid, int):
            gone = not os.path.exists("/proc/%d" % holder.pid)
        else:
            gone = holder.job and self.job_over and holder.cluster in (
                None, os.environ.get("SLURM_CLUSTER_NAME")) and self.job_over(str(holder.job))
        if gone is True:
            self._drop_held(held, holder.token)
        return gone is True

    def _read_holder(self, held):
        try:
            with os.fdopen(open_own_file(held, os.O_RDONLY, what="lock file"), "rb") as handle:
                data = load_json(handle.read(4096).decode("utf-8"))
            return Holder(*(data.get(name) for name in Holder._fields))
        except Missing:
            return None
        except (OSError, ValueError, AttributeError):  # half written: a live holder
            return Holder(None, None, None, None, None, None)

    def _drop_held(self, held, token):
        """Remove the ``.held`` lock file holding ``token``: renamed aside and read again first, so
        one another writer made meanwhile (it broke the same stale lock first) is put back."""
        if getattr(self._read_holder(held), "token", None) != token:
            return
        aside = "%s.%s" % (held, os.urandom(8).hex())
        try:
            os.rename(held, aside)
            if getattr(self._read_holder(aside), "token", None) != token:
                with contextlib.suppress(FileExistsError):
                    os.link(aside, held)
            os.unlink(aside)
        except FileNotFoundError:
            pass
        except OSError as error:
            raise StateError("cannot remove lock file %s: %s" % (held, error.strerror))

    def _replaced(self, name, path, held, descriptor, kernel):
        """Replace a lock file others may hold a shared lockf on (readable by them, or another
        user's lock in /proc/locks) by a new 0600 one, under the .held lock (trust-model.md)."""
        if not (kernel == "taken" and os.fstat(descriptor).st_mode & 0o044 or
                kernel == "busy" and _others_lock(descriptor)):
            return False
        token = self._held_free(held) and _create_held(held)
        try:
            if not token or not _same_file(descriptor, path) or _try_lock(
                    descriptor, path) != "taken" and not _others_lock(descriptor):
                return False
            self.write_text(name, "", mode=0o600)
            return True
        finally:
            if token:
                self._drop_held(held, token)

    def _stuck(self, path, held, wait, descriptor):
        holder = self._read_holder(held)
        if holder is None:
            return ("another process%s has held %s for over %d s; is another job of this chain "
                    "stuck?" % ("".join(" (pid %d of %s)" % (pid, uid_name(uid)) for pid, uid
                                        in lock_holders(descriptor)), path, wait))
        said = ", ".join("%s %s" % (name, value) for name, value in holder._asdict().items()
                         if value is not None and name != "token")
        return ("%s has been held for over %d s by %s: if that process is gone, delete the file"
                % (held, wait, said or "an unreadable holder"))


def find_place(store, job_id, predecessor_id, environ, warnings):
    """(the snapshot, the chain's cluster) under the lock; a job on another cluster is refused."""
    snapshot = store.snapshot()
    if predecessor_id is None:  # a first job, or one a guard or resume queued: which?
        snapshot = wait_to_be_named(store, snapshot, job_id, environ, warnings)
    previous = snapshot.record
    cluster = environ.get("SLURM_CLUSTER_NAME") or (previous and previous.cluster)
    if previous and previous.cluster not in (None, cluster) and (
            predecessor_id or job_id in (previous.job, previous.successor)):
        raise StateError("job %s runs on cluster %s, but the chain in %s runs on cluster %s: "
                         "its job IDs mean other jobs here; no work, no successor"
                         % (job_id, cluster, store.directory, previous.cluster))
    return snapshot, cluster


def dump_json(value):
    """The state files' JSON: one line, keys sorted (the same bytes for the same value)."""
    return json.dumps(value, sort_keys=True, allow_nan=False)


def _fsync_directory(directory):
    with contextlib.suppress(OSError):  # some file systems cannot: the rename is still atomic
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
        os.close(descriptor)


def check_warn(text):
    """``SIG@SECONDS`` (as Slurm's --signal: USR1@120, SIGUSR1@120, 10@120) canonically, or None."""
    if text is None:
        return None
    word, _, seconds = str(text).partition("@")  # no @: no seconds
    word = word.strip().upper()
    named = signal.Signals.__members__.get(word if word.startswith("SIG") else "SIG" + word)
    number = int(word) if is_digits(word, 2) else named and int(named)
    names = dict((int(value), value.name) for value in signal.Signals)
    if number not in names or number in (signal.SIGKILL, signal.SIGSTOP) or not is_digits(
            seconds, 6) or int(seconds) < 1:
        raise ValueError("warn must be SIG@SECONDS with a signal the work can catch and a "
                         "positive number of seconds before the link ends, such as USR1@120, "
                         "got %r" % (text,))
    return "%s@%d" % (names[number][3:], int(seconds))


def without_options(arguments, names):
    return [word for name, words, _ in option_groups(arguments)
            if name not in names for word in words]


def option_values(arguments, option):
    """The values ``arguments`` give an option (long name), in order: sbatch takes the last."""
    return [words[1] if len(words) == 2 else words[0].partition("=")[2]
            if words[0].startswith("--") else words[0][2:]
            for name, words, _ in option_groups(arguments) if name == option]


def exports_values(record):
    """Whether a record's sbatch options give variables values (--export=NAME=value)."""
    return any("=" in value for value in option_values(
        (record.get("sbatch_args") or []) + ((record.get("next") or {}).get("sbatch_args") or []),
        "--export"))


def events_from_json(data):
    if not isinstance(data.get("events"), list):
        raise ValueError("'events' is not a list")
    return [Event(**_checked(item, EVENT_CHECKS, Event._fields))
            for item in data["events"][-MAX_EVENTS:]]


def check_owned_dir(path, what="run directory"):
    """StateError for a directory the caller does not own alone, or that someone could swap."""
    try:
        info = os.stat(path)
    except OSError as error:
        raise StateError("cannot use %s %s: %s" % (what, path, error.strerror or error))
    problem = ("%s %s is not a directory" % (what, path) if not stat.S_ISDIR(info.st_mode) else
               owner_problem(info, path, what) or unsafe_path(path, what))
    if problem:
        raise StateError(problem)


def owner_problem(info, path, what):
    """Why the caller may not act on ``path`` (``info``: its stat) or None, as ssh's StrictModes."""
    mode, bits = stat.S_IMODE(info.st_mode), foreign_write(info, path)
    if info.st_uid != os.geteuid():
        return ("refusing to act on %s %s: it belongs to %s (uid %d, mode %04o), not to you; only "
                "a chain's owner may change it (status only reads it): %s" % (
                    what, path, uid_name(info.st_uid), info.st_uid, mode, "use a run directory "
                    "of your own" if what.endswith("directory") else "someone else put it in "
                    "your directory; read it, then delete it"))
    if bits:
        fix = ("it is a shared directory (sticky, as /tmp): use a run directory of your own"
               if mode & stat.S_ISVTX else "if you trust what is in it, run: chmod go-w "
               + shell_quote(path))
        return ("refusing to act on %s %s: mode %04o lets %s write it, so anyone there could act "
                "as you; %s" % (what, path, mode, "group and others" if bits == 0o022 else
                                "its group" if bits & 0o020 else "others", fix))
    return None


def check_nothing_planted(run_dir, options=(), workdir=None):
    """StateError if run_dir (the caller's alone), or a log directory inside it, holds what someone
    else put there while they could: a symlink, a file others may write, or anything named as a
    link's log there (Slurm opens it as you: through the link, into their file, or fails the link
    on their directory) or the guards' log. ``options``: the links' sbatch options (a relative
    log: in --chdir, else ``workdir``). A container's read-only output is left alone."""
    if not os.path.isdir(run_dir) or os.stat(run_dir).st_uid != os.geteuid():
        return  # none yet (made later), or not yours: refused as such when acted on
    base = option_value(options, "--chdir") or workdir or run_dir
    logs = [os.path.normpath(os.path.join(base, option_value(options, name))) for name in (
        "--output", "--error") if option_value(options, name)] or [
            os.path.join(base, "slurm-%j.out")]  # Slurm's default
    ends = {run_dir: [(GUARD_LOG, GUARD_LOG)]}
    for log in logs:  # a log directory elsewhere, or a symlink to one, is the user's to keep
        folder = os.path.dirname(log)
        if folder == run_dir or "%" not in folder and os.path.realpath(folder).startswith(
                os.path.realpath(run_dir) + os.sep) and folder.startswith(run_dir + os.sep):
            ends.setdefault(folder, []).append(log_name_ends(log))
    for folder, names in sorted(ends.items()):
        if folder != run_dir and os.path.isdir(folder):
            check_owned_dir(folder, "log directory")
        try:
            entries = os.listdir(folder)
        except FileNotFoundError:
            continue  # a log directory not made yet: submit says so
        except OSError as error:
            raise StateError("cannot list %s: %s" % (folder, error.strerror or error))
        for name in entries:
            path = os.path.join(folder, name)
            with contextlib.suppress(FileNotFoundError):  # the work's own file, gone meanwhile
                info = os.lstat(path)
                link, theirs = stat.S_ISLNK(info.st_mode), stat.S_ISDIR(info.st_mode)
                if info.st_uid not in (0, os.geteuid()) and (
                        link or not theirs and info.st_mode & 0o022 or any(
                            name.startswith(head) and name.endswith(tail) for head, tail in names)):
                    raise StateError(owner_problem(info, path, "symlink" if link else (
                        "directory entry" if theirs else "file")) + (
                        " (a directory of theirs you cannot empty: rename it, mv %s %s.theirs)"
                        % (shell_quote(path), shell_quote(path)) if theirs else ""))


def log_name_ends(path):
    """(what every name a log path's last part gives starts with, what it ends with), as Slurm
    fills its %-tokens in (slurm-%j.out: slurm-, .out)."""
    name = os.path.basename(path)
    if "%" not in name.replace("%%", ""):
        return name.replace("%%", "%"), name.replace("%%", "%")
    return name.split("%")[0], name.rsplit("%", 1)[1].lstrip("0123456789")[1:]


def foreign_write(info, path):
    """The write bits of an os.stat's mode that let someone else write: others', and the group's
    unless it is the owner's private group (umask 002 sites), never group 0 (some accounts' own),
    nor with an ACL (its mask is the group bits: a named user's entry may write)."""
    bits = info.st_mode & 0o022
    if not (bits & 0o020 and info.st_gid and _private_group(  # the common case: no pwd lookup
            info.st_uid, info.st_gid, int(time.time()) // 60)):
        return bits
    try:
        os.getxattr(path, "system.posix_acl_access")
    except OSError as error:  # no ACL, or none possible here: the group is private
        if error.errno in (errno.ENODATA, errno.EOPNOTSUPP):
            return bits & ~0o020
    return bits


# A minute's answers: status of many chains lists the accounts once (LDAP lists everyone), and a
# long-lived process (a driver) sees a new member of the group within a minute.
@functools.lru_cache(maxsize=64)
def _private_group(uid, gid, minute):
    import grp
    import pwd
    with contextlib.suppress(KeyError, OverflowError):
        user = pwd.getpwuid(uid)
        group = user.pw_gid == gid and grp.getgrgid(gid)
        return bool(group and group.gr_name == user.pw_name and set(group.gr_mem) <= {
            user.pw_name} and not any(other.pw_gid == gid and other.pw_uid != uid
                                      for other in pwd.getpwall()))  # nor another's primary one
    return False


def unsafe_path(path, what="run directory"):
    """Why someone else could swap ``path`` for a directory of theirs between two steps, or None:
    as ssh's StrictModes (docs/trust-model.md), over every directory and symlink on its way."""
    trusted = (0, os.geteuid())
    for entry, info, holds in path_walk(path):
        if info.st_uid not in trusted:
            return ("refusing to act on %s %s: %s %s belongs to %s (uid %d), who could swap it "
                    "for another; use a path through directories only you and root own"
                    % (what, path, "the directory" if holds else "the symlink", entry,
                       uid_name(info.st_uid), info.st_uid))
        if holds and not info.st_mode & stat.S_ISVTX and foreign_write(info, entry):
            quoted = shell_quote(entry)
            fix = ("run chmod +t %s (or chmod go-w %s)" % (quoted, quoted)
                   if info.st_uid == os.geteuid() else "ask its owner to run chmod +t " + quoted)
            return ("refusing to act on %s %s: %s (mode %04o) lets others rename what is in it "
                    "(no sticky bit), so they could swap the run directory for one of theirs; "
                    "%s, or use a run directory below ones only you can write"
                    % (what, path, entry, stat.S_IMODE(info.st_mode), fix))
    return None


def path_walk(path):
    """(path, lstat, True) of each directory the kernel searches on its way to ``path``, and
    (path, lstat, False) of each symlink it follows (nested ones too), as far as the path exists."""
    names, directory, held, walked = os.path.abspath(path).split(os.sep)[1:], os.sep, None, []
    while names and len(walked) < 1000:  # a symlink loop: the kernel's ELOOP says it
        name = names.pop(0)
        if name == "..":
            directory, held = os.path.dirname(directory), None
        if name in ("", ".", ".."):
            continue
        entry = os.path.join(directory, name)
        try:
            held = held or os.lstat(directory)
            walked.append((directory, held, True))  # a missing entry's too: make_run_dir's
            info = os.lstat(entry)
            target = os.readlink(entry) if stat.S_ISLNK(info.st_mode) else None
        except OSError:
            break  # not there yet (make_run_dir creates it) or not ours to see: the next says
        if target is None:
            directory, held = entry, info
            continue
        walked.append((entry, info, False))
        names[:0] = target.split(os.sep)
        if target.startswith(os.sep):
            directory, held = os.sep, None
    return walked


def lock_kind(directory, environ=os.environ, mounts=None):
    """(kind, why) of the lock a directory needs: RESUMABLE_CHAIN_LOCK if set, else "file" where
    its mount's kernel locks do not hold across nodes (NODE_LOCAL_LOCKS, in parse_mounts)."""
    forced = environ.get(LOCK_ENV)
    if forced:
        if forced not in LOCK_KINDS:
            raise StateError("%s=%s: use kernel or file" % (LOCK_ENV, forced))
        return forced, "%s=%s" % (LOCK_ENV, forced)
    point, fstype, options = mount_of(directory, mounts) or ("", "", ())
    local = NODE_LOCAL_LOCKS.get(fstype, ())
    said = [option for option in options if local is None or option in local]
    if local is not None and not said:
        return "kernel", None
    return "file", "%s mounted at %s%s: its kernel locks are missing or local to one node" % (
        fstype, point, " with " + ",".join(said) if local is not None else "")


_mounts_read = []  # /proc/mounts, parsed once per process (status of 50 chains, a link's locks)


def mount_of(directory, mounts=None):
    """(mount point, fstype, options) of the mount holding ``directory``, or None."""
    if mounts is None and not _mounts_read:  # none: the kernel's lock, tried first
        _mounts_read.append(parse_mounts(_proc_text("", "mounts")))
    path = os.path.realpath(directory)
    mounts = _mounts_read[0] if mounts is None else mounts
    return max((mount for mount in mounts if path == mount[0] or path.startswith(
        mount[0].rstrip("/") + "/")), key=lambda mount: len(mount[0]), default=None)


def _proc_text(pid, name):
    try:
        with open("/proc/%s/%s" % (pid, name)) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return ""  # it ended meanwhile


def parse_mounts(text):
    """[(mount point, fstype, [options])] of /proc/mounts text (``\\040`` is a space)."""
    return [(fields[1].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")
             .replace("\\134", "\\"), fields[2], fields[3].split(","))
            for fields in map(str.split, text.splitlines()) if len(fields) >= 4]


def open_own_file(path, flags, mode=0o644, what="state file", owned=True):
    """os.open a regular file, never through a symlink nor blocking on a FIFO (planted ones are
    Refused), ``owned``: only one of the caller's that no one else can write; StateError."""
    try:
        descriptor = _open_fresh(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as error:
        if error.errno == errno.ELOOP or os.path.islink(path):
            raise Refused("refusing %s %s: it is a symlink (nothing was changed)" % (what, path))
        raise (Missing if error.errno in (errno.ENOENT, errno.ENOTDIR) else StateError)(
            "cannot open %s %s: %s (nothing was changed)" % (what, path, error.strerror or error))
    info = os.fstat(descriptor)
    problem = ("refusing %s %s: it is a %s, not a regular file (nothing was changed)" % (
        what, path, "directory" if stat.S_ISDIR(info.st_mode) else "special file")
        if not stat.S_ISREG(info.st_mode) else owned and owner_problem(info, path, what))
    if problem:
        os.close(descriptor)
        raise Refused(problem)
    return descriptor


def _write_new(path, text, mode):
    """Create ``path`` holding ``text``, synced; O_EXCL: never through a planted symlink."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        payload = text.encode("utf-8", "surrogateescape")
        while payload:
            payload = payload[os.write(descriptor, payload):]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _checkpoint():
    """Between two steps that change state: where crash-injection tests kill the job."""
    target = os.environ.get(CRASH_ENV)
    if target:
        _checkpoints_passed[0] += 1
        if str(_checkpoints_passed[0]) == target:
            os.kill(os.getpid(), signal.SIGKILL)


def _open_fresh(path, flags, mode):
    """os.open, retried for VIEW_WAIT_SECONDS while ESTALE (an NFS client renamed over it)."""
    started = time.monotonic()
    while True:
        try:
            return os.open(path, flags, mode)
        except OSError as error:
            if error.errno != errno.ESTALE or time.monotonic() - started > VIEW_WAIT_SECONDS:
                raise
        time.sleep(1)
        os.listdir(os.path.dirname(path))


def _try_lock(descriptor, path):
    """Take a POSIX record lock: "taken", "busy", or why this mount has none (NO_KERNEL_LOCK)."""
    try:
        fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return "taken"
    except OSError as error:
        if error.errno in NO_KERNEL_LOCK:
            return error.strerror or errno.errorcode.get(error.errno, str(error.errno))
        if error.errno not in (errno.EACCES, errno.EAGAIN):
            raise StateError("cannot lock %s: %s" % (path, error.strerror))
        return "busy"


def _same_file(descriptor, path):
    with contextlib.suppress(OSError):
        return os.path.samestat(os.fstat(descriptor), os.lstat(path))


def lock_holders(descriptor):
    """[(pid, uid or None if hidden)] of this node's holders (not waiters) of a lock on the file."""
    info = os.fstat(descriptor)
    inode = "%02x:%02x:%d" % (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    return [(int(words[4]), _proc_uid(words[4])) for words in map(str.split, _proc_text(
        "", "locks").splitlines()) if len(words) > 5 and words[1] != "->" and words[5] == inode
        and is_digits(words[4])]


def _proc_uid(pid):
    with contextlib.suppress(OSError):
        return os.stat("/proc/" + pid).st_uid


def _others_lock(descriptor):
    """Whether another user's process holds a lock on the open file (never one of the chain)."""
    return any(uid not in (None, os.geteuid()) for _, uid in lock_holders(descriptor))


def _create_held(held, holder=None):
    """The token of a ``.held`` lock file naming ``holder`` (default: this process) created whole
    (a hard link of a complete temporary: NFS-safe), or None when another holder got there first."""
    if holder is None:
        host, pid, now = os.uname().nodename, os.getpid(), time.time()
        holder = Holder(os.environ.get("SLURM_CLUSTER_NAME"), os.environ.get("SLURM_JOB_ID"),
                        host, pid, int(now), "%d-%d-%s" % (pid, now * 1e6, host))
    temporary = "%s.%s" % (held, os.urandom(8).hex())
    try:
        _write_new(temporary, dump_json(holder._asdict()) + "\n", 0o644)
        try:
            os.link(temporary, held)
        except FileExistsError:
            return None
        except OSError:
            if os.stat(temporary).st_nlink != 2:  # NFS: the link may exist though it "failed"
                raise
        return holder.token
    except OSError as error:
        raise StateError("cannot create lock file %s: %s" % (held, error.strerror or error))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def job_over(job_id):
    """Whether a job of this cluster ended (True), runs (False) or nobody can say (None)."""
    answer = SLURM.controller(job_id, timeout=MIN_COMMAND_TIMEOUT)
    if answer.job is not None:  # forgotten (MinJobAge) only after it ended: no sacct asked,
        return is_final(answer.job.state)  # which a site without accounting cannot answer
    return True if answer.forgotten and "Invalid job id" in (answer.error or "") else None


def probe_lock(directory):
    """(kind, why) of the lock writers of ``directory`` take now, for status: as lock_kind, or
    "file" where a lock call is refused, "refused" where every writer refuses the directory."""
    with contextlib.suppress(OSError):  # gone since it was read: the lock says nothing either
        info = os.stat(directory)
        problem = info.st_uid == os.geteuid() and (  # others' status reads it as they may
            owner_problem(info, directory, "run directory") or unsafe_path(directory))
        if problem:
            return "refused", problem
    kind, why = lock_kind(directory)
    if kind == "file":
        return kind, why
    try:
        descriptor = open_own_file(os.path.join(directory, LOCK_FILE), os.O_RDONLY,
                                   what="lock file", owned=False)
    except Refused as error:
        return "refused", "%s: every writer refuses it" % error
    except StateError:
        return kind, why  # no lock file yet, or not readable: nothing to learn
    try:
        fcntl.lockf(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in NO_KERNEL_LOCK:
            return "file", "lock calls refused here (%s)" % error.strerror
    finally:
        os.close(descriptor)  # closing releases it
    return kind, why


def make_run_dir(run_dir, what="run directory"):
    """Create run_dir and its missing parents, writable by the caller alone whatever the umask
    (refuse one the caller may not act on); those it created, outermost first."""
    created, path = [], os.path.abspath(run_dir)
    while not os.path.lexists(path) and path != os.path.dirname(path):
        created.insert(0, path)
        path = os.path.dirname(path)
    problem = unsafe_path(run_dir, what)
    if problem:  # before anything is made below a directory someone else could swap
        raise StateError(problem)
    umask = os.umask(0o077)
    os.umask(umask)
    try:  # private while it is made, then readable as the umask says, never writable by others
        for directory in created:
            os.mkdir(directory, 0o700)
            os.chmod(directory, 0o755 & ~umask)
    except OSError as error:
        raise StateError("cannot create %s %s: %s" % (what, run_dir, error.strerror or error))
    check_owned_dir(os.path.abspath(run_dir), what)  # what was made, as every later use reads it
    return created


def unnamed(snapshot, job_id, environ):
    """Whether the journal should, but does not, name a job without a predecessor: resume or a
    guard queued it (NAMED_ENV in environ), or the chain goes on (a lagging view, a 2nd chain)."""
    record = snapshot.record
    if environ.get(NAMED_ENV) == "1":
        return record is None or job_id not in (record.job, record.successor)
    return bool(record and record.action in WORK_ACTIONS and not snapshot.cancelled
                and job_id not in (record.job, record.successor))


def wait_to_be_named(store, snapshot, job_id, environ, warnings, *, sleep=time.sleep,
                     clock=time.monotonic):
    """Wait until the journal names a job without a predecessor (its guard or ``resume`` wrote it
    first): a fresh chain over one that goes on would lose its caps, retries and history."""
    named = environ.get(NAMED_ENV) == "1"
    if not unnamed(snapshot, job_id, environ):
        return snapshot
    if not named:  # a second chain? (a copy's goes on where it was made)
        if copied_from(store, snapshot.record):
            return snapshot
        last = SLURM.final(snapshot.record.job)
        if last is not None and base_state(last.state) == "COMPLETED":
            return snapshot  # the chain finished (its journal could not say so): a new one starts
        check_no_live_chain(store, snapshot.record, job_id, environ.get("SLURM_CLUSTER_NAME"),
                            warnings)  # (_start_chain checks it when it starts one)
    snapshot, waited = wait_for_view(store, snapshot, lambda now: unnamed(now, job_id, environ),
                                     sleep=sleep, clock=clock)
    if unnamed(snapshot, job_id, environ):
        record = snapshot.record or Record()
        raise StateError("job %s has no predecessor, but the chain in %s %s (job %s, link %s) "
                         "and does not name it, after %d s: not starting a fresh chain over it; "
                         "no work, no successor (resumable-chain resume continues that chain; "
                         "resumable-chain cancel ends it, then a new job starts a new chain)" % (
                             job_id, store.directory, "was resumed or healed with it" if named
                             else "goes on", record.job, record.link, VIEW_WAIT_SECONDS))
    if waited >= 1:
        warnings.append("the run directory's view lagged (a client cache): waited %d s until "
                        "the journal named job %s" % (waited, job_id))
    return snapshot


def _run_again(store, snapshot, next_link, environ, warnings):
    """The journal's job is this one, run before (requeued, rerun after a crash) or queued by
    ``resume`` (its decision journaled): count nothing twice; nothing to redo once ``queued`` with
    a successor (a lowered limit survives a requeue), else queue one unless a killed run did
    (sbatch answered, no journal written)."""
    record = snapshot.record
    if record.source == "resume" and snapshot.last_job != record.job:
        observation = Observation(Job(record.predecessor, record.predecessor_state), "resume", "")
        record, own = draw_on_budget(record.budget_dir, record, None, warnings) if (
            record.budget_dir) else (record, None)
        if record.action in WORK_ACTIONS:
            store.apply(snapshot, record)
        return _finish_link(store, record, observation, next_link, environ, warnings, own=own)
    observation = Observation(Job(record.predecessor or "", record.predecessor_state), "journal",
                              "job %s already ran its prologue (restart %s): predecessor not "
                              "counted again" % (record.job,
                                                 environ.get("SLURM_RESTART_COUNT", "0")))
    if record.action not in WORK_ACTIONS or (record.phase == "queued" and record.successor):
        return Outcome(ACTION_EXIT[record.action], record, observation, warnings)
    successor, error = queued_successor(record.job)
    if error:
        warnings.append("WARNING: cannot look for a successor already queued (%s)" % error)
    return _finish_link(store, record, observation, next_link, environ, warnings,
                        successor=successor)


def settle_place(store, snapshot, job_id, predecessor_id, warnings):
    """(the snapshot, the predecessor: the journal's for a job queued without a dependency) once
    the view shows the predecessor's record; refuse a second continuation or an older chain's."""
    if predecessor_id is None and snapshot.record and snapshot.record.successor == job_id:
        predecessor_id = snapshot.record.job
    lagged = view_lags(snapshot, predecessor_id)
    snapshot, waited = wait_for_view(store, snapshot, lambda now: view_lags(now, predecessor_id))
    if lagged:
        warnings.append("the run directory's view lagged (a client cache): waited %d s for job "
                        "%s's state%s" % (waited, predecessor_id, ", in vain" if view_lags(
                            snapshot, predecessor_id) else ""))
    record = snapshot.record
    if record is None or predecessor_id is None:
        return snapshot, predecessor_id
    if record.predecessor == predecessor_id:
        raise StateError("job %s is a duplicate link: predecessor %s was already continued by job "
                         "%s; no work, no successor" % (job_id, predecessor_id, record.job))
    if record.job == predecessor_id and record.successor not in (None, job_id):
        raise StateError("job %s is a duplicate link: job %s queued %s as its successor; no work, "
                         "no successor" % (job_id, predecessor_id, record.successor))
    if record.job != predecessor_id:
        raise StateError("job %s continues job %s, which is not the last link of the chain in %s "
                         "(job %s): it belongs to an older chain or is a stray; no work, no "
                         "successor" % (job_id, predecessor_id, store.directory, record.job))
    return snapshot, predecessor_id


def wait_for_view(store, snapshot, lags, sleep=time.sleep, clock=time.monotonic):
    """(the last snapshot re-read each second, the seconds waited) once it no longer ``lags``."""
    started = clock()
    while lags(snapshot) and clock() - started < VIEW_WAIT_SECONDS:
        sleep(1)
        os.listdir(store.directory)  # refreshes an NFS client's cache of the directory
        snapshot = store.snapshot()
    return snapshot, clock() - started


def view_lags(snapshot, predecessor_id):
    """Whether this client's view of the run directory (NFS caches it up to 60 s) lags behind the
    record the predecessor wrote before it queued this link (job IDs grow)."""
    record = snapshot.record
    if not predecessor_id:
        return False
    if record is None:
        return snapshot.last_job is None
    return record.job != predecessor_id and (record.successor == predecessor_id or (
        is_job_id(record.job or "") and int(record.job) < int(predecessor_id)))


def holds_chain(path):
    """Whether path is a run directory (it has a chain, journal or submit record)."""
    return any(os.path.exists(os.path.join(path, name))
               for name in (CHAIN_FILE, JOURNAL_FILE, SUBMIT_FILE))


def open_to_others(path):
    """Whether others than its owner may write in path (/tmp): a chain there could be anyone's,
    so it neither hides the chains below it from status nor refuses a submit below it."""
    with contextlib.suppress(OSError):
        return bool(foreign_write(os.stat(path), path))
    return False


def _chains_below(path, depth):
    """The chains below path; OSError if it cannot be listed (one below it that cannot is not the
    caller's to look into). scandir knows a directory and a symlink without a stat (Lustre)."""
    entries = sorted(os.scandir(path), key=lambda entry: (  # a sweep's tasks: 2 < 10
        int(entry.name) if is_digits(entry.name, 12) else float("inf"), entry.name))
    found = []
    for entry in entries:
        is_dir = False  # when it cannot be stat'ed (a link into a directory one may not search)
        with contextlib.suppress(OSError):
            is_dir = entry.is_dir()
        if entry.name.startswith(".") or not is_dir:
            continue
        whole = holds_chain(entry.path)
        if whole:
            found.append(entry.path)
        if depth > 1 and not os.path.islink(entry.path) and (not whole or open_to_others(
                entry.path)):  # and below a chain in a directory others can write: anyone's
            with contextlib.suppress(OSError):
                found += _chains_below(entry.path, depth - 1)
    return found


def check_chain_place(run_dir):
    """Refuse a new chain's run directory inside a chain's, or above chains: status would not
    see it there, or see it alone (submit, render, and a rendered chain's first job)."""
    parent = run_dir
    while parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
        if holds_chain(parent) and not open_to_others(parent):
            raise StateError("run directory %s is inside the chain in %s, where status never "
                             "looks: give a directory outside it" % (run_dir, parent))
    with contextlib.suppress(OSError):  # none yet; a symlink to a chain (latest -> ...) hides none
        below = [] if holds_chain(run_dir) else [
            path for path in _chains_below(run_dir, CHAIN_DEPTH) if not os.path.islink(path)
            and not open_to_others(path)]
        if below:
            raise StateError("run directory %s holds chains (%s): status would show the new one "
                             "alone; give a directory of its own" % (run_dir, below[0]))


def _start_chain(store, snapshot, job_id, next_link, warnings, cluster):
    """A first job: no live chain beside it, an old chain's files kept as ``*.prev`` (a link never
    starts a fresh chain over an existing one), a copy of its script (Slurm's spool copy, ``$0``,
    goes when the job ends; ``resume`` needs it; failing costs only that), and a warning when no
    --time reaches the successors."""
    check_no_live_chain(store, snapshot.record, job_id, cluster, warnings)
    if snapshot.cancelled and (store.read_submitted() or {}).get("first_job") == job_id:
        return snapshot  # cancelled before it ran (plan_link stops it), not an older chain's mark
    text, header = None, None  # submit checked where its chain goes, and kept its script
    if os.path.dirname(os.path.abspath(next_link.script)) != store.directory:  # rendered
        with contextlib.suppress(OSError), open(next_link.script, "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape")
        with contextlib.suppress(ValueError):  # not a batch script: sbatch said so already
            header = split_batch_script(text or "")[0]
        check_chain_place(store.directory)
        check_nothing_planted(store.directory, script_directives(header or "") + list(
            next_link.sbatch_args), next_link.workdir)
    if snapshot.record or snapshot.last_job or snapshot.cancelled:
        store.keep_previous()
        own_guard_log(store.directory)  # its guard, queued by submit, appends to it
        warnings.append("a new chain in %s: the previous one's files are kept as *%s"
                        % (store.directory, PREVIOUS_SUFFIX))
        snapshot = Snapshot(None, None, None, None, None)
    with contextlib.suppress(OSError, StateError):
        if text is not None:
            store.write_text(SCRIPT_COPY, text, mode=0o700)  # it may name a notify command
    if header is None:
        return snapshot  # submit read its --time
    with contextlib.suppress(ValueError):
        own = option_value(script_directives(header), "--time")
        links, limit = option_value(next_link.sbatch_args, "--time"), job_start_and_limit(
            os.environ)[1]  # 23.02+: this job's own limit
        if own or os.environ.get("SBATCH_TIMELIMIT"):
            pass  # the script's (or sbatch's default) limits every link, this job too
        elif not links:
            warnings.append("WARNING: no --time in this job's #SBATCH lines or in the prologue's "
                            "sbatch options: the successors get the partition's default time "
                            "limit (none, if it has no DefaultTime), not this job's (a --time "
                            "given to sbatch on its command line is this job's alone)")
        elif not (limit and limit <= (parse_duration(links) or limit)):
            warnings.append("WARNING: --time=%s in the prologue's sbatch options limits the "
                            "successors alone: this job has no #SBATCH --time and runs up to %s; "
                            "put #SBATCH --time=%s in the script" % (links, format_duration(
                                limit) if limit else "sbatch's --time or the partition's "
                                "default", links))
    return snapshot


def check_no_live_chain(store, record, job_id, cluster, warnings):
    """Refuse a first job beside a chain whose links still run or wait; warn when squeue cannot
    tell (a safety net must not block a restart)."""
    if record is None or record.action not in WORK_ACTIONS or copied_from(
            store, record):  # a copy's jobs: its original's chain, elsewhere
        return
    links = [job for job in (record.job, record.successor) if job]
    try:
        live = Slurm(None if record.cluster in (None, cluster) else record.cluster).jobs(links)
    except StateError as error:
        warnings.append("cannot check whether the previous chain (jobs %s) still runs: %s"
                        % (" ".join(links), error))
        return
    refuse_live(store.directory, live, "job %s would start a second chain; no work, no "
                "successor (cancel it with resumable-chain cancel %s)" % (job_id, shell_quote(
                    store.directory)))


def copied_from(store, record, submitted=None):
    """The run directory the chain in store's directory was copied from (another chain's, whose
    jobs its files name), or None: as its own copy of its links' script says (submit's, else the
    first job's). Never a file outside it, which others or a later edit could change."""
    spec = record.next or {}
    script = store.path(os.path.basename(spec.get("script") or (submitted or {}).get(
        "script") or SCRIPT_COPY))
    home = prologue_run_dir(script if os.path.isfile(script) else store.path(SCRIPT_COPY))
    if not home:
        return None
    home = home.replace("%a", option_value(spec.get("sbatch_args") or (), "--array") or "%a")
    with contextlib.suppress(OSError):  # not there: moved, or not seen from here (resume says)
        return None if os.path.samefile(home, store.directory) or not holds_chain(home) else home
    return None


def prologue_run_dir(script):
    """The absolute run directory a job script's prologue step names (0.1 wrote ``--max-retries
    3`` first), or None: where its links keep their state, whatever resume was given."""
    import re
    import shlex
    with contextlib.suppress(OSError, ValueError, StateError), open(open_own_file(  # status too
            script, os.O_RDONLY, what="job script", owned=False), "rb") as handle:
        # the step's line as bash ends lines (a path may hold U+2028), found at C speed after a
        # long header or long sbatch options; the script's words follow "--"
        found = re.search(rb"(?m)^(?![ \t]*#).* prologue --.*", handle.read(MAX_SCRIPT_BYTES))
        words = shlex.split(os.fsdecode(found.group()).split(" prologue ", 1)[1]) + [
            "--"] if found else ["--"]
        named = next((word for word in words[:words.index("--")] if not word.startswith("-")), "")
        return named if os.path.isabs(named) else None
    return None


# ---------------------------------------------------------------------------
# 5. The decision: the predecessor's end, and what the link does
# ---------------------------------------------------------------------------


def observe_predecessor(job_id, window, sleep=time.sleep, clock=time.monotonic,
                        slurm=SLURM, answer=None):
    """A finished predecessor's final state: scontrol's (``answer``, if the prologue asked),
    else sacct's (every run of a requeued ID), retried for ``window`` s before NOT_VISIBLE."""
    job_id = parse_job_id(job_id, "predecessor job ID")
    deadline = clock() + window
    controller = controller_answer(answer) if answer else slurm.controller(
        job_id, timeout=first_lookup_timeout(window))
    final = controller.job if controller.job and is_final(controller.job.state) else None
    if final and not final.restarts:
        return Observation(final, "scontrol", "")
    ask_controller = not final and not controller.forgotten
    notes = {"scontrol": "scontrol: %s" % (controller.error or "shows %s" % (
        controller.job.state if controller.job else "nothing"))}
    for attempt in itertools.count():
        timeout = min(command_timeout(), max(deadline - clock(), MIN_COMMAND_TIMEOUT))
        jobs, error = slurm.accounting([job_id], timeout=timeout)
        job = jobs.get(job_id)
        if job and is_final(job.state):
            return Observation(job, "sacct", "")
        notes["sacct"] = ("sacct failed: %s" % error if error else
                          "sacct still shows %s" % job.state if job else "sacct has no record")
        if ask_controller:
            controller = slurm.controller(job_id, timeout=timeout)
            if controller.job and is_final(controller.job.state) and not controller.job.restarts:
                return Observation(controller.job, "scontrol", notes["sacct"])
            ask_controller = not controller.forgotten
            if controller.error:
                notes["scontrol"] = "scontrol: %s" % controller.error
        remaining = deadline - clock()
        if remaining <= 0:
            break
        sleep(min(LOOKUP_BACKOFF[min(attempt, len(LOOKUP_BACKOFF) - 1)], remaining))
    note = "%s; %s after %g s" % (notes["sacct"], notes["scontrol"], window)
    if final:  # requeued, and accounting never answered: the last run is all we know
        return Observation(final, "scontrol", note + "; runs before the last requeue not counted")
    return Observation(Job(job_id, NOT_VISIBLE, 0), None, note)


def controller_answer(result):  # of ``scontrol show job -o``
    job = parse_scontrol(result.stdout) if result.returncode == 0 else None
    if job is not None:
        return ControllerAnswer(job, None, False)
    error = last_line(result.stderr) if result.returncode != 0 else "no JobState in its answer"
    return ControllerAnswer(None, error, result.returncode is None or "Invalid job id" in error)


def format_duration(seconds):
    days, rest = divmod(int(seconds), 86400)
    text = "%02d:%02d:%02d" % (rest // 3600, rest // 60 % 60, rest % 60)
    return "%d-%s" % (days, text) if days else text


def is_final(state):
    return base_state(state) not in LIVE_STATES


def base_state(state):
    """``"CANCELLED by 0"`` or a truncated ``"CANCELLED+"`` -> ``"CANCELLED"``."""
    words = str(state).strip().split()
    return words[0].rstrip("+").upper() if words else ""


def parse_sacct(text):
    """{job ID: [Job, ...]} of ``sacct -P -n -o SACCT_FIELDS`` output; steps, bad lines skipped."""
    records = collections.OrderedDict()
    for line in (text or "").splitlines():
        field = dict(zip(SACCT_FIELDS.split(","), (value.strip() for value in line.split("|"))))
        job_id, state = field.get("JobIDRaw") or field.get("JobID", ""), field.get("State", "")
        if not is_job_id(job_id) or not state or is_digits(state[0]):
            continue
        elapsed = field.get("ElapsedRaw", "")
        records.setdefault(job_id, []).append(Job(
            job_id, state, int(elapsed) if is_digits(elapsed, 12) else 0,
            start=_known(field.get("Start")), end=_known(field.get("End")),
            submit=_known(field.get("Submit")), exit_code=slurm_exit_code(field.get("ExitCode")),
            nodes=_known(field.get("NodeList"), UNKNOWN_NODES),
            time_limit=parse_duration(field.get("Timelimit"))))  # UNLIMITED: None
    return records


def summarize_sacct(records):
    """One Job of all the records of a job ID (``sacct -D``): the newest, with the elapsed time
    of the runs that ended when the next was submitted (a requeue; not an ID reused later)."""
    if not records:
        return None
    ordered = sorted(records, key=lambda job: (job.submit or "", job.start or "9999"))
    total = ordered[-1].elapsed
    for earlier, later in zip(reversed(ordered[:-1]), reversed(ordered[1:])):
        ended, submitted = epoch(earlier.end), epoch(later.submit)
        if None in (ended, submitted) or abs(submitted - ended) > REQUEUE_GAP_SECONDS:
            break
        total += earlier.elapsed
    return ordered[-1]._replace(elapsed=total, restarts=len(ordered) - 1)


def epoch(text):
    """Epoch seconds of a time as Slurm prints it (local: ``2026-12-03T16:46:25``), or None."""
    try:
        return int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))
    except (TypeError, ValueError, OverflowError):
        return None


def decide_link(store, snapshot, place, observation, options, warnings):
    """(this link's Record, with the guard its predecessor or submit queued; its Job or None)."""
    job_id, predecessor_id, cluster = place
    record = _work_done_before(store, plan_link(
        job_id, predecessor_id, observation, snapshot, options.settings, options.next_link,
        now=options.now(), budget_dir=options.budget_dir, cluster=cluster, warn=options.warn,
        notify=store.read_notify() if options.notify is None else options.notify), warnings)
    record, own = draw_on_budget(record.budget_dir, record, observation, warnings) \
        if record.budget_dir else (record, None)
    previous = snapshot.record or (record.predecessor is None and first_job_record(
        store.read_submitted()))
    if previous and previous.successor == record.job:
        return record._replace(guarded_by=previous.guard), own
    return record, own


def warned_before(warn, limit, elapsed):
    """Whether --warn's signal (``warn``: SIG@S) came before a link ended after ``elapsed`` s."""
    return bool(warn and limit and elapsed >= limit - warn_signal(warn)[1])


def plan_link(job_id, predecessor_id, observation, snapshot, settings, next_link, *, now=0,
              budget_dir=None, cluster=None, notify=None, warn=None):
    """This link's Record: decide(), the cancel mark, the cap (``resume``'s settings win)."""
    previous, first = snapshot.record, predecessor_id is None
    observed = Job(None, None, 0) if first else observation.job
    cause, settings_from = None, "prologue"
    if not first and previous is not None and previous.settings_from == "resume":
        settings, settings_from = Settings(previous.max_retries, previous.max_walltime), "resume"
        notify, warn = previous.notify, previous.warn  # and the options resume may have set
        next_link = next_link._replace(sbatch_args=list(
            (previous.next or {}).get("sbatch_args", next_link.sbatch_args)))
    elapsed = observed.elapsed
    walltime = 0 if first else (snapshot.walltime or 0) + elapsed
    # Exit 75 after the warning is progress, however soon it came (a short or lowered limit), once
    warned = warned_before(warn, observed.time_limit or (previous and previous.time_limit), elapsed)
    if previous is not None and previous.predecessor_exit_code == RESUME_EXIT and (
            previous.predecessor_elapsed or 0) < NO_PROGRESS_SECONDS:  # twice in a row: the
        warned = False  # warning comes before the work can save anything; retries end the loop
    progress = None if warned else elapsed
    decision = decide(observed.state, retries=snapshot.retries or 0, walltime=walltime,
                      max_retries=settings.max_retries, max_walltime=settings.max_walltime,
                      exit_code=observed.exit_code, elapsed=progress)
    if decision.action not in WORK_ACTIONS:
        cause = CAUSE_OF_MEANING[state_meaning(observed.state, observed.exit_code, progress)]
    elif snapshot.cancelled:  # a first job's is its own chain's (_start_chain)
        decision, cause = Decision("stop", decision.retries, "the chain was cancelled with the "
                                   "cancel command (%s): stopping" % snapshot.cancelled), "cancel"
    capped = stop_at_cap(decision, walltime, settings.max_walltime)
    if capped is not decision:
        decision, cause = capped, "max_walltime"
    return Record(job=job_id, predecessor=predecessor_id, predecessor_state=observed.state,
                  predecessor_elapsed=elapsed, source=observation.source if observation else None,
                  predecessor_exit_code=exit_status(observed.exit_code), action=decision.action,
                  cause=cause, reason=decision.reason, walltime=walltime, retries=decision.retries,
                  max_retries=settings.max_retries, max_walltime=settings.max_walltime,
                  link=link_number(0 if first else chain_length(snapshot), decision.action),
                  next=next_link._asdict(), phase="counted", time=int(now), budget_dir=budget_dir,
                  cluster=cluster, notify=notify, warn=warn, settings_from=settings_from)


def decide(state, *, retries=0, walltime=0, max_retries=DEFAULT_MAX_RETRIES, max_walltime=None,
           exit_code=None, elapsed=None):
    """The Decision of a job whose predecessor ended in ``state`` (None: first job; NOT_VISIBLE:
    not found) with ExitCode ``"75:0"`` (or 75) after ``elapsed`` s; ``walltime`` includes it.
    ``elapsed`` None: not known, or the work was warned (--warn), so a quick exit 75 resumes.
    A link then also stops with under a minute of max_walltime left (Slurm's shortest limit)."""
    _check_job_report(state, elapsed, exit_code, dict(
        retries=retries, walltime=walltime, max_retries=max_retries,
        max_walltime=0 if max_walltime is None else max_walltime))
    if state is None:
        return Decision("start", 0, "first job of the chain: starting fresh")
    if base_state(state) == NOT_VISIBLE:  # as any state, in any case
        return Decision("resume", retries, "predecessor's final state not visible in "
                        "accounting: resuming without counting a retry")
    meaning = state_meaning(state, exit_code, elapsed)
    if meaning in (RESUME_ASKED, STOP_ASKED, NO_PROGRESS):
        state = "%s with exit %d%s" % (state, exit_status(exit_code), meaning == NO_PROGRESS and
                                       " after only %s s (no progress: counted as a retry)"
                                       % elapsed or "")
    if meaning == LAG:
        return Decision("resume", retries, "predecessor still shows %s (accounting lag): "
                        "resuming without counting a retry" % state)
    if meaning == COMPLETE:
        return Decision("complete", retries, "predecessor COMPLETED: the work is done")
    if meaning in (STOP, STOP_ASKED):
        return Decision("stop", retries, "predecessor %s: stopping the chain" % state)
    if meaning in (INTERRUPTED, RESUME_ASKED):
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


def _check_job_report(state, elapsed, exit_code, counts):
    """A one-line ValueError for what no job reports (a driver's YAML text, say)."""
    if exit_code is not None and slurm_exit_code(exit_code) is None:  # 75.0 would read as a signal
        raise ValueError("decide: exit_code must be Slurm's ExitCode (\"75:0\" or 75) or None, "
                         "got %r" % (exit_code,))
    for name, value in counts.items():
        check_max_retries(value, name)
    if not (state is None or isinstance(state, str) and state.strip()):
        raise ValueError("decide: state must be a Slurm job state, None or NOT_VISIBLE (got %r)"
                         % (state,))
    if not (elapsed is None or isinstance(elapsed, (int, float)) and not isinstance(
            elapsed, bool) and elapsed >= 0):  # nan fails >= 0 too
        raise ValueError("decide: elapsed must be seconds, 0 or more, or None, got %r" % (elapsed,))


def state_meaning(state, exit_code=None, elapsed=None):
    """STATE_MEANING of a final state; if FAILED, as the work's exit status and run time say."""
    meaning = STATE_MEANING.get(base_state(state), RETRY)
    if base_state(state) == "FAILED":
        meaning = WORK_EXIT_MEANING.get(exit_status(exit_code), meaning)
    if meaning == RESUME_ASKED and elapsed is not None and elapsed < NO_PROGRESS_SECONDS:
        return NO_PROGRESS
    return meaning


def stop_at_cap(decision, walltime, max_walltime):
    """A stop if what is left of max_walltime (a link's limit) is under Slurm's 1-minute minimum."""
    if (decision.action in WORK_ACTIONS and max_walltime is not None
            and max_walltime - walltime < MIN_TIME_LIMIT):
        return Decision("stop", decision.retries, "only %d s of max_walltime %d s remain, less "
                        "than Slurm's 1-minute minimum time limit: stopping the chain"
                        % (max(max_walltime - walltime, 0), max_walltime))
    return decision


def chain_length(snapshot):
    """Links that ran their work, from the journal (None: no journal gave a link number)."""
    record = snapshot.record
    if record is None or record.link is None:
        return None
    if record.action in WORK_ACTIONS and record.job != snapshot.last_job:
        return record.link - 1  # a link that resume queued, which has not run yet
    return record.link


def exit_status(exit_code):
    """Slurm's ExitCode ``"75:0"`` (or 75) -> 75; None for a death by signal (``"0:15"``)."""
    text = "" if exit_code is None or isinstance(exit_code, bool) else str(exit_code).strip()
    status, colon, signal_number = text.partition(":")
    return int(status) if is_digits(status, 3) and (not colon or signal_number == "0") else None


def link_number(length, action):
    """A record's ``link``: links that ran, this one included if it works."""
    return None if length is None else length + (action in WORK_ACTIONS)


def restate(record, action, reason, cause):
    """The record with another decision (and the link number that follows)."""
    length = None if record.link is None else record.link - (record.action in WORK_ACTIONS)
    return record._replace(action=action, reason=reason, cause=cause,
                           link=link_number(length, action))


# ---------------------------------------------------------------------------
# 6. The successor: the decision recorded, the successor and its guard queued
# ---------------------------------------------------------------------------


def _work_done_before(store, record, warnings):
    """A TIMEOUT predecessor whose exit trap journaled ``finished`` completes the chain. Only
    TIMEOUT: bash runs the trap with status 0 also when a signal kills it (FAILED, work undone)."""
    if record.action not in WORK_ACTIONS or base_state(record.predecessor_state) != "TIMEOUT":
        return record
    try:
        events = store.read_events()
    except StateError as error:
        warnings.append("cannot tell whether job %s's work finished: %s" % (record.predecessor,
                                                                           error))
        return record
    for event in reversed(events):  # since the chain was last resumed
        if event.event == "resumed":
            break
        if event.event == "finished" and event.job == record.predecessor:
            return restate(record, "complete", "job %s's work exited 0 (its exit trap said so) "
                           "though Slurm recorded %s: the work is done" % (
                               record.predecessor, record.predecessor_state), "work_done")
    return record


def settle_ended(budget, keep=(), cluster=None):
    """Settle ended links' reservations (but ``keep``'s); one not final in accounting stays."""
    reserved = sorted((job for job in budget.reservations if job not in keep), key=int)
    live = set(job.job_id for job in Slurm(cluster).jobs(reserved))  # none asked of no job
    found, _ = Slurm(cluster).accounting([job for job in reserved if job not in live])
    for job_id, job in found.items():
        if is_final(job.state):
            budget = settle(budget, job_id, job.elapsed)
    return budget


def _finish_link(store, record, observation, next_link, environ, warnings, *, successor=None,
                 own=None):
    """Journal the prologue's end; a working link queues a successor unless given ``successor``."""
    if record.action not in WORK_ACTIONS:
        record = record._replace(phase="done")
        store.write_record(record)
        if record.guarded_by:  # the chain ends here: nothing is left to guard
            SLURM.cancel([record.guarded_by])
        event = journal_event(store, Event(EVENT_OF_ACTION[record.action], record.predecessor or
                                           record.job, record.link, record.reason, record.time),
                              warnings)  # a first job's: its own, as cancel's event names it
        return Outcome(ACTION_EXIT[record.action], record, observation, warnings, event)
    next_link = NextLink(**record.next) if record.next else next_link
    next_link = next_link._replace(script=runnable_script(store, next_link.script))
    again = bool(successor)  # a rerun found it: a killed run may have queued its guard too
    successor, error = (successor, None) if successor else queue_successor(
        array_task_id(record.job, environ), next_link, warnings)
    # Lowered to whole minutes of its caps (the chain ends within a minute of them), unless its
    # own limit fits: scontrol's if the budget asked, else its environment's (23.02+), no call
    cap = link_end(0, None, link_caps(record))
    limit = own.time_limit if own is not None else job_start_and_limit(environ)[1]
    fits = cap is None or limit is not None and limit <= cap
    record = record._replace(successor=successor, successor_error=error,
                             time_limit=None if fits else cap, phase="queued")
    if not record.guarded_by:
        record = _unguarded(record, store.directory, environ, warnings, again)
    store.write_record(record, durable=False)  # a crash that loses it is a kill after the sbatch
    return Outcome(EXIT_WORK, record, observation, warnings)


def runnable_script(store, script):
    """The job script to queue: Slurm deletes its spool copy (a link's ``$0``) once the link
    ended; the first job saved a copy in the run directory, checked like a state file (Refused):
    someone may have planted it there, and sbatch would run it as the caller."""
    if not os.path.isfile(script) and os.path.isfile(store.path(SCRIPT_COPY)):
        script = store.path(SCRIPT_COPY)
    if os.path.dirname(os.path.abspath(script)) == os.path.abspath(store.directory):
        with contextlib.suppress(OSError):  # the caller's own symlink: a script elsewhere
            info = os.lstat(script)
            if stat.S_ISLNK(info.st_mode) and info.st_uid == os.geteuid():
                return script
        with contextlib.suppress(Missing):  # sbatch says so
            os.close(open_own_file(script, os.O_RDONLY, what="job script"))
    return script


def queue_successor(job_id, next_link, warnings):
    """sbatch this job's successor: (its ID, None), or (None, sbatch's error) warned. Not
    requeueable (a node Prolog failure would hold it): its guard replaces it if it dies."""
    options = successor_options(next_link, "--dependency=afternotok:%s" % job_id,
                                "--kill-on-invalid-dep=yes", "--no-requeue")
    try:
        return SLURM.submit(options, next_link.script, next_link.script_args,
                            next_link.workdir)[0], None
    except StateError as error:
        warnings.append("WARNING: could not queue a successor of job %s (%s). Chain will NOT "
                        "continue on failure until one is queued: this job's guard, if it has one, "
                        "queues it when the job ends (status says whether it will)."
                        % (job_id, error))
        return None, str(error)


def successor_options(next_link, *extra):
    """The sbatch options of a link: job name (else Slurm's spool copy of the default script
    would name every successor ``slurm_script``), the chain's options, ``extra``."""
    return ((["--job-name=" + next_link.job_name] if next_link.job_name else [])
            + list(next_link.sbatch_args) + list(extra))


def sbatch_answer(result):
    """(job ID, cluster or None) of ``sbatch --parsable``; StateError when it queued nothing."""
    if result.returncode != 0:
        raise StateError(last_line(result.stderr))
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()] or ["no output"]
    job_id, _, cluster = lines[0].partition(";")  # ID[;cluster]
    if not is_job_id(job_id) or any(char.isspace() for char in cluster):
        raise StateError("unexpected sbatch output %r" % lines[0])
    return job_id, cluster or None


def last_line(text):
    """A Slurm error's telling line: the last (others are often plugin noise) but getopt's hint."""
    lines = [line.strip() for line in (text or "").splitlines()
             if line.strip() and not line.strip().startswith('Try "')]
    return lines[-1] if lines else "no output"


def job_start_and_limit(environ):
    """(start, time limit) in seconds of SLURM_JOB_START_TIME/_END_TIME (23.02+) or (None, None)."""
    start, end = environ.get("SLURM_JOB_START_TIME", ""), environ.get("SLURM_JOB_END_TIME", "")
    if is_digits(start) and is_digits(end):
        limit = int(end) - int(start)
        return int(start), limit if 0 < limit != UNLIMITED_END else None
    return None, None


def link_caps(record):
    """Seconds a working link may run by its caps: max_walltime's rest, its budget reservation."""
    return [seconds for seconds in (
        None if record.max_walltime is None else record.max_walltime - record.walltime,
        record.reserved) if seconds is not None]


def time_limit_note(script, given, environ):
    """A warning that no --time limits the links, or None; StateError if the partition has none."""
    if option_value(given, "--time") or environ.get("SBATCH_TIMELIMIT"):
        return None
    name = (option_value(given, "--partition") or environ.get("SBATCH_PARTITION") or "").split(
        ",")[0]  # of several, the first one's (sbatch tries them in order)
    result = Slurm(option_value(given, "--clusters")).run(["scontrol", "show", "partition", "-o"]
                                                          + [name][:bool(name)])
    found = parse_partition(result.stdout, name) if result.returncode == 0 else None
    words = "no --time in the options or in %s: " % script
    if found and found[1] is None:
        raise StateError(words + "partition %s has no time limit (DefaultTime and MaxTime), so no "
                         "link would ever end to continue the chain; pass --time, e.g. "
                         "--time=4:00:00 (--time=UNLIMITED to submit it anyway)" % found[0])
    return "WARNING: " + words + "the links get %s" % (
        "partition %s's default time limit, %s" % (found[0], format_duration(found[1]))
        if found else "the partition's default time limit")


def queued_successor(job_id):
    """(the successor a killed run or a failed sbatch queued, squeue's error)."""
    try:
        return (SLURM.dependents().get(job_id) or [None])[0], None
    except StateError as error:
        return None, str(error)


def finish_queueing(run_dir, environ, again=False):
    """The background step beside the work: the successor's guard, then the cancel of this
    link's own (until then that one covers it, ``_guard_covers``); then the time limit."""
    job_id, store, warnings = environ.get("SLURM_JOB_ID") or "", chain_store(run_dir), []
    with store.locked():
        record = store.read_record()
        if record is None or record.job != job_id or record.action not in WORK_ACTIONS:
            return None, warnings  # the chain went on, or ended: nothing left for this link
        if record.successor and record.guard is None:
            record = swap_guard(record, run_dir, environ, warnings, again=again)
            if record.guard and record.guarded_by:
                SLURM.cancel([record.guarded_by])  # it may have ended already: nothing to say then
            store.write_record(record)
    if not record.time_limit:
        return record, warnings
    seconds, answer = record.time_limit, SLURM.controller(job_id)
    if answer.job is None:
        warnings.append("WARNING: cannot read job %s's time limit (%s); not clamped to the %d s "
                        "left of its caps" % (job_id, answer.error, seconds))
    elif base_state(answer.job.state) in LIVE_STATES - {"COMPLETING"} and (  # else ended: its
            answer.job.time_limit is None or answer.job.time_limit > seconds):  # work was quick
        error = SLURM.error(["scontrol", "update", "JobId=%s" % job_id,  # users may only lower it
                             "TimeLimit=%d" % (seconds // 60)])
        if error:
            warnings.append("WARNING: cannot lower job %s's time limit to %d min (%s)"
                            % (job_id, seconds // 60, error))
    return record, warnings


def journal_event(store, event, warnings):
    """The event if new, else None. A broken events file costs the notification, not the chain."""
    try:
        return event if store.add_event(event) else None
    except StateError as error:
        warnings.append("event %s not journaled, not notified: %s" % (event.event, error))
        return None


def _unguarded(record, run_dir, environ, warnings, again):
    """A guardless link (a pasted prologue's first job; a failed sbatch) queues, before its work,
    the successor's guard, else its own, unless squeue shows its guard (a lagging view hid it)."""
    own = queued_guard(record.job)
    if own:
        return record._replace(guarded_by=own)
    if record.successor:
        return swap_guard(record, run_dir, environ, warnings, again=again)
    guard, error = queue_guard(record.job, run_dir, (record.next or {}).get("job_name"), environ)
    if error:
        warnings.append("WARNING: could not queue a guard for job %s either (%s): if it ends "
                        "before a successor is queued, resumable-chain resume continues the "
                        "chain" % (record.job, error))
    return record._replace(guarded_by=guard)


def queue_guard(job_id, run_dir, job_name, environ, after=None, again=False, *, python=None):
    """(guard ID, None) or (None, sbatch's error). No SBATCH_* (SBATCH_GRES: its links get theirs
    from its environment). Requeueable: nothing guards a guard (chaos runs lost chains so)."""
    guard = again and queued_guard(job_id)
    if guard:
        return guard, None
    own_guard_log(run_dir)
    words = ["guard", run_dir, job_id] + (["--after=" + after] if after else [])
    kept = {KEPT_SBATCH + name[7:]: value for name, value in environ.items()
            if name.startswith("SBATCH_")}
    options = ["--parsable", "--job-name=" + GUARD_PREFIX + (job_name or "resumable-chain"),
               "--dependency=afterany:" + job_id, "--requeue", "--time=%d" % GUARD_MINUTES,
               "--ntasks=1", "--cpus-per-task=1", "--mem=" + GUARD_MEMORY, "--chdir=" + run_dir,
               "--open-mode=append", "--output=" + output_pattern(run_dir, GUARD_LOG),
               "--export=ALL"]  # its KEPT_SBATCH, whatever a site's default (a cli_filter)
    options += ["--%s=%s" % (option, environ[variable]) for option, variable in (
        ("partition", "SLURM_JOB_PARTITION"), ("account", "SLURM_JOB_ACCOUNT"))
        if environ.get(variable)]
    # exec: the guard hears Slurm's SIGTERM (guard_command) with no shell that dies at it first
    command = "exec " + " ".join(map(shell_quote, step_command(*words, python=python)))
    environment = slurm_environment(("SBATCH_",), **kept)  # the user's locale: its links' too
    try:
        return sbatch_answer(run_slurm(["sbatch"] + options + ["--wrap", command],
                                       environment=environment))[0], None
    except StateError as error:
        guard = queued_guard(job_id)
        return guard, None if guard else str(error)


def own_guard_log(run_dir):
    """Make GUARD_LOG before Slurm does, with the job's umask (0664 under umask 002: the group
    could write lines status shows as the guard's); one left group-writable is emptied, or if it
    has a second name (a hard link: cp -al, or planted), replaced (that name keeps its content).
    The owner's alone stays whatever its names: a running guard's output is open in it."""
    path = os.path.join(run_dir, GUARD_LOG)
    with contextlib.suppress(StateError, OSError):
        descriptor = open_own_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode=0o644,
                                   what="guard log", owned=False)
        try:
            info = os.fstat(descriptor)
            if info.st_uid == os.geteuid() and foreign_write(info, descriptor):
                if info.st_nlink > 1:
                    os.unlink(path)
                    return own_guard_log(run_dir)
                os.ftruncate(descriptor, 0)
                os.fchmod(descriptor, stat.S_IMODE(info.st_mode) & ~0o022)
        finally:
            os.close(descriptor)


def output_pattern(directory, name):
    """``directory``'s % escaped (``runs/%x`` would be the job's name, or the job FAILED 0:53)."""
    return os.path.join(directory.replace("%", "%%"), name)


def step_command(*words, python=None):
    """The command that runs this module's ``words`` in a job, as the prologue does."""
    return [python or sys.executable, "-I", "-S", "-c", BOOTSTRAP, module_path()] + list(words)


def swap_guard(record, run_dir, environ, warnings, again=False):
    """Queue the successor's guard; without one, Slurm requeues it if its launch fails."""
    guard, error = queue_guard(record.successor, run_dir, (record.next or {}).get("job_name"),
                               environ, after=record.job, again=again)
    if error:
        warnings.append("WARNING: could not queue a guard for job %s (%s): if it dies before "
                        "its prologue, only Slurm's requeue can start it again" % (
                            record.successor, error))
        SLURM.error(["scontrol", "update", "JobId=%s" % record.successor, "Requeue=1"])
    return record._replace(guard=guard, guard_error=error)


# ---------------------------------------------------------------------------
# 7. The work starts: the link's line in the log, the exports, the background step forked
# ---------------------------------------------------------------------------


def _log(*messages):
    for message in messages:
        sys.stderr.write("resumable-chain: %s\n" % as_run(visible(message)))
    sys.stderr.flush()


def as_run(text):  # "resumable-chain resume" in messages and journals: the command as run
    for word in USER_COMMANDS:
        text = text.replace("resumable-chain %s" % word, "%s %s" % (COMMAND, word))
    return text


def visible(text):
    """Text with control and format characters (but newline, tab) escaped: no file drives a tty;
    UTF-8 that an ASCII locale decoded into surrogates (Python 3.6 under LANG=C) shown as text."""
    import unicodedata
    with contextlib.suppress(UnicodeError):
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
    return "".join(char if char in "\n\t" or unicodedata.category(char) not in HIDDEN_CATEGORIES
                   else ascii(char)[1:-1] for char in text)  # as Python writes it: \U000e0041


def _say(text):
    """What came from state files is shown, never obeyed."""
    _write(as_run(visible(text)))


def _write(text):
    # Bytes, so that a non-ASCII path prints under any locale (Python 3.6 under LANG=C); text
    # to a stream without bytes (a driver's contextlib.redirect_stdout(io.StringIO())).
    sys.stdout.flush()
    if hasattr(sys.stdout, "buffer"):
        sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    else:
        sys.stdout.write(text)
    sys.stdout.flush()


def fit_own_limit(outcome, environ):
    """(outcome, start, time limit) of a working link: one whose own time limit is within its
    caps lowers nothing, so its record says so (its work is told the limit it has)."""
    record = outcome.record
    start, limit = job_start_and_limit(environ)
    if start is None and (record.warn or record.time_limit):  # before 23.02, if it matters
        job = SLURM.controller(record.job).job
        start = epoch(job.start) if job else None
        limit = job.time_limit if start is not None else None
    if record.time_limit and limit is not None and limit <= record.time_limit:
        outcome = outcome._replace(record=record._replace(time_limit=None))
    return outcome, start, limit


def describe_link(outcome):
    record, observation = outcome.record, outcome.observation
    source, note = (observation.source, observation.note) if observation else (None, "")
    if record.predecessor is None:
        seen = "none (first job)"
    elif source == "resume":
        seen = "%s (queued by the resume command)" % record.predecessor
    else:
        seen = "%s %s" % (record.predecessor, record.predecessor_state or NOT_VISIBLE)
        if source in ("sacct", "scontrol"):
            seen += " (elapsed %d s, from %s)" % (observation.job.elapsed, source)
    clamp = (" | time limit lowered to %d min" % (record.time_limit // 60)
             if record.time_limit else "")
    if record.reserved:
        clamp += " | reserved %d s of the shared budget in %s" % (record.reserved,
                                                                  record.budget_dir)
    return ("job %s: %s | predecessor %s | walltime %d s %s | retries %d/%s | successor %s%s | %s%s"
            % (record.job, record.action, seen, record.walltime,
               "of %d s" % record.max_walltime if record.max_walltime is not None else "(no cap)",
               record.retries, record.max_retries if record.max_retries is not None else "?",
               record.successor or "none", clamp, record.reason or "", note and " (%s)" % note))


def link_end(start, time_limit, caps=()):
    """Epoch seconds (None: never) a link started at ``start`` ends: its limit or tightest cap."""
    ends = [seconds for seconds in [time_limit] + [int(cap) // 60 * 60 for cap in caps]
            if seconds is not None]
    return None if start is None or not ends else int(start) + min(ends)


def start_while_working(run_dir, outcome):
    """Fork ``while-working`` as the work starts (no second Python start-up), to stderr only."""
    again = outcome.observation is not None and outcome.observation.source == "journal"
    sys.stdout.flush()
    try:
        child = os.fork()
    except OSError as error:
        _log("cannot start the background step (%s): the guard of this job queues its "
             "successor's guard when it ends" % error)
        return
    if child == 0:
        status = EXIT_USAGE
        try:
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            status = main(["while-working", run_dir] + (["--again"] if again else []))
        finally:
            os._exit(status)


def link_exports(record, run_dir, end=None):
    """{name: text} of the variables the prologue exports to the work; ``end``: link_end."""
    caps = link_caps(record)
    values = dict(
        DIR=run_dir, JOB=record.job, LINK=record.link, RESUMING=int(record.action == "resume"),
        PREDECESSOR=record.predecessor, SUCCESSOR=record.successor, WALLTIME_USED=record.walltime,
        WALLTIME_LEFT=max(min(caps), 0) if caps else None, MAX_WALLTIME=record.max_walltime,
        RETRIES=record.retries, MAX_RETRIES=record.max_retries, TIME_LIMIT=record.time_limit,
        EXIT_RESUME=RESUME_EXIT, END=end, EXIT_STOP=STOP_EXIT)
    return collections.OrderedDict((EXPORT_PREFIX + name, "" if value is None else str(value))
                                   for name, value in sorted(values.items()))


# ---------------------------------------------------------------------------
# 8. Arrays: one chain per array task
# ---------------------------------------------------------------------------


def array_task_id(job_id, environ):
    """What a link's successor waits for: its job ID, or ``<array>_<task>`` (docs/arrays.md)."""
    if environ.get("SLURM_ARRAY_JOB_ID") == job_id and environ.get(
            "SLURM_ARRAY_TASK_COUNT", "1") != "1" and environ.get("SLURM_ARRAY_TASK_ID"):
        return "%s_%s" % (job_id, environ["SLURM_ARRAY_TASK_ID"])
    return job_id


def task_run_dir(run_dir, environ):
    """This job's run directory: ``%a`` in it (a chain per array task) is the job's task ID."""
    task = environ.get("SLURM_ARRAY_TASK_ID")
    if "%a" in run_dir and not is_digits(task, 9):
        raise StateError("run directory %s names an array task (%%a), but job %s is not an "
                         "array task; nothing done" % (run_dir, environ.get("SLURM_JOB_ID")))
    return os.path.abspath(run_dir.replace("%a", task or ""))


def parse_array(text, max_array_size):
    """(sorted task IDs, throttle or None: %0 too) of --array as slurm_parse_array_tok reads it."""
    if not text:
        return None
    indexes, _, throttle = text.partition("%")
    tasks = set()
    for token in indexes.split(","):
        first, dash, rest = token.strip("[]").partition("-")
        last, colon, step = (rest if dash else first).partition(":")  # no dash: first keeps any ":"
        step = step if colon else "1"
        if not all(is_digits(number, 9) for number in (first, last, step)) or \
                not int(first) <= int(last) < max_array_size or \
                colon and not 0 < int(step) < max_array_size:
            raise ValueError("--array=%s: %r is not an index sbatch takes (I, I-J or I-J:STEP, "
                             "each below MaxArraySize %d; e.g. 0-99 or 1,3,5-9:2)"
                             % (text, token, max_array_size))
        tasks.update(range(int(first), int(last) + 1, int(step)))
    digits = throttle.split("%")[0]
    if throttle and not is_digits(digits, 9):
        raise ValueError("--array=%s: the throttle %%%s is not a count" % (text, throttle))
    return sorted(tasks), int(digits) or None if throttle else None


def array_spec(tasks):
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``: sorted task IDs as --array takes them."""
    runs = [[task for _, task in run] for _, run in itertools.groupby(  # consecutive tasks
        enumerate(tasks), lambda pair: pair[1] - pair[0])]
    return ",".join(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]) for run in runs)


def sweep_options(run_dir, header, sbatch_args):
    """(the --array's tasks or None, task i's options: jobs named ``i_<name>``, docs/arrays.md);
    refused before anything is queued (StateError if sacctmgr or squeue fails)."""
    given = script_directives(header) + sbatch_args
    spec = option_value(given, "--array")
    if not spec:
        return None, lambda task: sbatch_args  # no sweep: the options as given
    name = option_value(given, "--job-name") or os.path.basename(os.path.abspath(run_dir))
    sbatch_args = without_options(sbatch_args, ("--array", "--job-name"))
    config = slurm_settings()
    size = config.get("MaxArraySize")
    if not is_digits(size, 9):
        raise StateError("--array=%s: cannot read MaxArraySize (scontrol show config): nothing "
                         "submitted" % spec)
    tasks, throttle = parse_array(spec, int(size))
    if throttle:
        raise ValueError("--array=%s: the throttle %%%d would not hold: each later link of a task "
                         "is a job of its own, which it does not count; use a QOS limit such as "
                         "MaxJobsPerUser, or no throttle" % (spec, throttle))
    if "limits" in config.get("AccountingStorageEnforce", "").split(","):
        user = uid_name(os.getuid())
        answers = [run_slurm(argv) for argv in (
            ["sacctmgr", "-n", "-P", "show", "assoc", "where", "user=" + user,
             "format=cluster,account,user,maxsubmit,defaultqos"],
            ["sacctmgr", "-n", "-P", "show", "qos", "format=name,maxsubmitpu"],
            ["squeue", "-h", "-r", "-u", user, "-o", "%A"])]  # -r: each array task counts
        failed = next((result for result in answers if result.returncode != 0), None)
        if failed:
            raise StateError("cannot read your job limits (%s): nothing submitted"
                             % last_line(failed.stderr))
        limits = submit_limits(answers[0].stdout, answers[1].stdout, config.get("ClusterName"),
                               option_value(given, "--account"), option_value(given, "--qos"))
        beyond = sweep_beyond_limit(len(tasks), limits, len(_rows(answers[2].stdout, 1)))
        if beyond:
            raise StateError("--array=%s: %s; nothing submitted" % (spec, beyond))
    return tasks, lambda task: sbatch_args + ["--job-name=%d_%s" % (task, name)]


# ---------------------------------------------------------------------------
# 9. Budget (--budget-dir): a walltime budget shared by chains
# ---------------------------------------------------------------------------


def parse_budget(data):  # read_json passes it JSON objects only
    def seconds(value):
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNTER

    def table(value):
        return isinstance(value, dict) and all(
            is_job_id(str(key)) and seconds(item) for key, item in value.items())

    budget = Budget(*(data.get(name) for name in Budget._fields))
    if not (seconds(budget.cap) and seconds(budget.settled) and table(budget.reservations)
            and table(budget.settled_jobs) and _cluster(budget.cluster)):
        raise ValueError("cap, settled, reservations, settled_jobs or cluster missing or malformed")
    return budget


def budget_left(budget):
    return max(budget.cap - budget.settled - sum(budget.reservations.values()), 0)


def reserve(budget, job_id, limit):
    """(budget, seconds): whole minutes of min(limit, what is left) reserved, None if under 1."""
    if job_id in budget.reservations:  # a requeued link keeps its reservation
        return budget, budget.reservations[job_id]
    left = budget_left(budget)
    seconds = (left if limit is None else min(limit, left)) // 60 * 60
    if seconds < MIN_TIME_LIMIT:
        return budget, None
    return budget._replace(reservations=dict(budget.reservations, **{job_id: seconds})), seconds


def settle(budget, job_id, elapsed):
    """A link's reservation replaced by its elapsed seconds, idempotent (a job settled before,
    then requeued, adds only what it ran since)."""
    if job_id not in budget.reservations and job_id not in budget.settled_jobs:
        return budget  # not a link of this budget
    counted = budget.settled_jobs.get(job_id, 0)
    return budget._replace(settled=budget.settled + max(elapsed - counted, 0), reservations={
        job: seconds for job, seconds in budget.reservations.items() if job != job_id},
        settled_jobs=dict(budget.settled_jobs, **{job_id: max(elapsed, counted)}))


def draw_on_budget(budget_dir, record, observation, warnings):
    """(record, this job from scontrol): all ended links settled; a working link's time reserved."""
    store = chain_store(budget_dir)
    with store.locked(name=BUDGET_LOCK):
        budget = store.read_budget()
        if budget.cluster is None:
            budget = budget._replace(cluster=record.cluster)
        if observation is not None and observation.source in ("scontrol", "sacct"):
            budget = settle(budget, record.predecessor, observation.job.elapsed)
        try:
            budget = settle_ended(budget, keep=(record.job,), cluster=None if budget.cluster in (
                None, record.cluster) else budget.cluster)
        except StateError as error:
            warnings.append("WARNING: cannot settle the shared budget's ended links: %s" % error)
        own = seconds = None
        if record.action in WORK_ACTIONS:
            own = SLURM.controller(record.job).job
            budget, seconds = reserve(budget, record.job, own.time_limit if own else None)
        store.write_text(BUDGET_FILE, dump_json(budget._asdict()) + "\n")
    if record.action not in WORK_ACTIONS:
        return record, None
    if seconds is None:
        return restate(record, "stop", "only %d s left of the shared budget in %s (cap %d s): "
                       "less than Slurm's 1-minute minimum time limit: stopping the chain"
                       % (budget_left(budget), budget_dir, budget.cap), "budget"), own
    return record._replace(reserved=seconds), own


def budget_report(budget_dir):
    """The shared budget's figures (``budget --json``), ended links settled in what it shows."""
    budget = chain_store(check_path(budget_dir, "budget_dir")).read_budget()
    with contextlib.suppress(StateError):  # squeue unreachable: show what is known
        budget = settle_ended(budget, cluster=cluster_to_ask(budget.cluster)[0])
    return {"dir": os.path.abspath(budget_dir), "cap": budget.cap, "used": budget.settled,
            "reserved": sum(budget.reservations.values()), "left": budget_left(budget),
            "reservations": dict(budget.reservations), "cluster": budget.cluster}


def set_budget(budget_dir, cap):
    """Create a shared budget with this cap (seconds), or change an existing one's cap."""
    cap, budget_dir = check_max_walltime(cap), check_path(budget_dir, "budget_dir")
    if cap is None:
        raise ValueError("a shared budget needs --max-walltime")
    make_run_dir(budget_dir, "budget directory")
    store = chain_store(budget_dir)
    with store.locked(name=BUDGET_LOCK):
        try:
            budget = store.read_budget()._replace(cap=cap)
        except StateError:
            if os.path.lexists(store.path(BUDGET_FILE)):
                raise  # corrupt (a dangling symlink too): never silently reset what was used
            budget = Budget(cap, 0, {}, {}, current_cluster())
        store.write_text(BUDGET_FILE, dump_json(budget._asdict()) + "\n")
    return budget_report(budget_dir)


# ---------------------------------------------------------------------------
# 10. Notify (--notify): a command run once per chain event
# ---------------------------------------------------------------------------


def check_notify(command):
    """Return a notify command (or None) if it can be run with /bin/sh -c; ValueError if not."""
    if command is not None and (not isinstance(command, str) or not command.strip()
                                or "\0" in command):
        raise ValueError("notify must be a shell command such as 'mail -s chain me@site', got %r"
                         % (command,))
    return command


def notify(command, event, run_dir, timeout=NOTIFY_TIMEOUT):
    """Run a chain's notify command, only as its owner; the line to log (the chain unaffected)."""
    problem = os.path.isdir(run_dir) and owner_problem(os.stat(run_dir), run_dir, "run directory")
    if problem:
        return "%s not notified: %s" % (event.event, problem)
    values = {"EVENT": event.event, "DIR": run_dir, "JOB": event.job, "LINK": event.link,
              "REASON": as_run(event.reason)}  # a command as run
    environment = dict(os.environ, **{EXPORT_PREFIX + name: "" if value is None else str(value)
                                      for name, value in values.items()})
    environment.pop(NAMED_ENV, None)  # not passed on to jobs the command may queue
    result = run_command(["/bin/sh", "-c", command], timeout, environment)
    if result.returncode == 0:
        return "notified %s (job %s)" % (event.event, event.job)  # never the command: a token
    return "notify for %s (job %s) failed (%s); the chain is not affected" % (
        event.event, event.job, "timed out after %g s" % timeout if result.returncode is None
        else "exit %d: %s" % (result.returncode, last_line(result.stderr)))


# ---------------------------------------------------------------------------
# 11. Warn (--warn SIG@S): the work warned before its link ends
# ---------------------------------------------------------------------------


def warn_signal(text):
    """(signal number, seconds) of a check_warn() text."""
    word, _, seconds = check_warn(text).partition("@")
    return int(getattr(signal, "SIG" + word)), int(seconds)


def check_warn_fits(warn, sbatch_args, max_walltime=None):
    """ValueError if ``warn`` comes no sooner than a link's end (link_end: --time, max_walltime);
    a warning if it comes in a link's first minute (see plan_link), else None."""
    longest = link_end(0, parse_duration(option_value(sbatch_args, "--time")) or None,
                       [max_walltime] if max_walltime else [])
    lead = warn_signal(warn)[1] if warn and longest else None
    if lead is not None and lead >= longest:
        raise ValueError("--warn %s can never come before a link ends: its --time or "
                         "--max-walltime ends it after %s; give it fewer seconds"
                         % (warn, format_duration(longest)))
    if lead is not None and longest - lead < NO_PROGRESS_SECONDS:
        return ("WARNING: --warn %s comes %d s into a link (its --time or --max-walltime ends it "
                "after %s): an exit 75 under a minute into a link counts a retry when the link "
                "before did so too, so that a work that cannot save in time fails after "
                "--max-retries instead of looping; give the links a longer --time"
                % (warn, longest - lead, format_duration(longest)))
    return None


# Slurm's --signal is fixed at submit time (it misses a limit the link lowers later), its B: form
# signals only the batch shell, its plain form only srun steps. So the link starts a timer in a
# session of its own (not signalled with the work, not waited for by the prologue's $(...)) that
# signals the work's processes that catch it (wants_signal). It exits when the batch shell is
# gone (proctrack/linuxproc does not follow a process in its own session).


def start_warner(warn, end, limit, environ):
    """Start ``warn-work SIG@S END SHELL`` for the rest of this job; return what to log."""
    if end is None:
        return "no warning before this link ends: its end is not known (no time limit)"
    if limit is not None and warn_signal(warn)[1] >= limit:  # every link would be told at once
        return "no warning before this link ends: --warn %s is not shorter than the job's time " \
            "limit (%s); give it fewer seconds" % (warn, format_duration(limit))
    shell = environ.get("SLURM_TASK_PID") or str(os.getppid())
    try:
        subprocess.Popen(step_command("warn-work", warn, str(end), shell),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         start_new_session=True)  # stderr: the job's, for its one line
    except OSError as error:
        return "cannot start the warning timer (%s): the work gets no signal" % error
    return "the work gets SIG%s s before this link ends at %s" % (
        warn.replace("@", " "), time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(end)))


def parse_proc_stat(text):
    """(pid, parent pid) from /proc/PID/stat's text; None if it is not one."""
    head, _, tail = (text or "").rpartition(")")  # the command name may hold ) and spaces
    fields, pid = tail.split(), head.split(" (")[0].strip()
    if len(fields) < 2 or not is_digits(pid) or not is_digits(fields[1]):
        return None
    return int(pid), int(fields[1])


def catches(status_text, signum):
    """Whether /proc/PID/status's SigCgt shows a handler for ``signum``."""
    masks = [line[7:] for line in (status_text or "").splitlines() if line.startswith("SigCgt:")]
    try:
        return bool(int(masks[0].strip(), 16) >> (signum - 1) & 1)
    except (IndexError, ValueError):
        return False


def wants_signal(program, status_text, signum, script=""):
    """srun always (it forwards the signal; 22.05's srun waits for signals in a thread with them
    blocked, so its SigCgt does not show them: seen), a shell that traps it (docs/warnings.md),
    any other process with a handler (it would die); pure."""
    if program in SHELLS and (signum == signal.SIGINT or exit_trapped(status_text) and not traps(
            script, signum)):
        return False
    return program == "srun" or catches(status_text, signum)


def exit_trapped(status_text):
    return all(catches(status_text, mark) for mark in EXIT_TRAP_MARKS)


def traps(script, signum):
    """Whether a top-level line of a shell script (not indented, not in a here-document) traps
    ``signum`` (``trap 'save; exit 75' USR1``; docs/warnings.md); pure."""
    import shlex
    names = {signal.Signals(signum).name, signal.Signals(signum).name[3:], str(int(signum))}
    ending = None  # the end of the here-document being skipped: its body is another script
    for line in script.splitlines():
        if ending is not None:
            ending = None if line.strip() == ending else ending
            continue
        with contextlib.suppress(ValueError):  # a handler over several lines is not read
            words = [word.rstrip(";") for word in shlex.split(line, comments=True)]
            here = next((index for index, word in enumerate(words)  # not <<< nor $((1 << 2))
                         if "<<" in word.replace("<<<", "") and "((" not in word), None)
            if here is not None:  # its delimiter: the rest of its word, or the next word
                ending = words[here].partition("<<")[2].lstrip("-") or (words[here + 1:] + [""])[0]
            at = 2 if words[1:2] == ["--"] else 1  # the handler's index, its signals after it
            if not line[:1].isspace() and words[:1] == ["trap"] and words[at:at + 1] not in (
                    [], [""], ["-"], ["-p"], ["-l"], ["-P"]) and names.intersection(words[at + 1:]):
                return True
    return False


def shell_script(pid):
    """The script a shell runs: -c's text, or its script file's (relative: from its cwd)."""
    words, command = _proc_text(pid, "cmdline").split("\0")[1:], False
    while words and words[0][:1] in ("-", "+") and words[0] not in ("-", "--"):
        option = words.pop(0)
        command = command or option[:1] == "-" and option[1:2] != "-" and "c" in option
        if option in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file") and words:
            words.pop(0)  # its value
    words = words[words[:1] == ["--"]:]
    if command or not words:
        return "".join(words[:1])
    with contextlib.suppress(StateError, OSError):
        descriptor = open_own_file(os.path.join("/proc/%d/cwd" % pid, words[0]), os.O_RDONLY,
                                   what="script", owned=False)
        with open(descriptor, "rb") as handle:
            return handle.read(MAX_SCRIPT_BYTES).decode("utf-8", "replace")
    return ""


def work_processes(parents, root):
    """``root`` and its descendants, from {pid: parent pid}; pure."""
    found = [root]
    for pid in found:  # the list grows as the children of each pid in it are found
        found += [child for child, parent in parents.items()
                  if parent == pid and child not in found]
    return sorted(found)


def signal_work(shell, signum):
    """Signal the batch shell and its descendants that want it; return their pids."""
    parents = dict(filter(None, (parse_proc_stat(_proc_text(name, "stat"))
                                 for name in os.listdir("/proc") if is_digits(name))))
    sent = []
    for pid in work_processes(parents, shell):
        try:  # its executable's name: a job script's comm is slurm_script
            program = os.path.basename(os.readlink("/proc/%d/exe" % pid))
        except OSError:  # it ended meanwhile (a zombie has no exe), or it is no process of ours
            continue
        status = _proc_text(pid, "status")
        script = shell_script(pid) if program in SHELLS and exit_trapped(status) else ""
        if pid != os.getpid() and wants_signal(program, status, signum, script):
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
                sent.append(pid)
    return sent


def warn_command(warn, end, shell, sleep=time.sleep, clock=time.time):
    """The timer start_warner starts (see above)."""
    if not is_digits(end) or not is_digits(shell):
        raise ValueError("warn-work: give SIG@S END SHELL (a link starts this by itself)")
    signum, seconds = warn_signal(warn)
    end, shell = int(end), int(shell)
    at, proc = end - seconds, "/proc/%d" % shell
    late = clock() + 60 >= at  # due as the work starts (a cap lowered the link's end): warn
    # once it can hear it, as it may set its handler later
    while os.path.isdir(proc):  # else the work ended before the warning
        if clock() < at:
            sleep(min(at - clock(), WARN_POLL))
            continue
        sent = signal_work(shell, signum)
        if sent or not late or clock() + 1 >= end:
            _log(("SIG%s sent %d s before the link ends to pids " + " ".join(map(str, sent))
                  if sent else "SIG%s not sent (the link ends in %d s): no process of the work "
                  "catches it (nor traps it: a shell with an EXIT trap catches every signal)") % (
                      warn.partition("@")[0], end - int(clock())))
            return 0
        sleep(1)  # its handler may not be set yet
    return 0


# ---------------------------------------------------------------------------
# 12. The background step and the guard: the guard swapped once the successor is queued, and
#     a job that continues the chain if the successor dies before its prologue
# ---------------------------------------------------------------------------


def while_working_command(run_dir, again=False):
    """The background step a working link starts as its work starts (finish_queueing)."""
    run_dir = os.path.abspath(run_dir)
    record, warnings = finish_queueing(run_dir, os.environ, again=again)
    _log(*warnings)
    if record is not None and not (record.successor or record.guarded_by):
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # the job's log is not held open for hours
        guard_until_queued(run_dir, os.environ)
    return 0


def guard_until_queued(run_dir, environ, sleep=time.sleep):
    """Neither successor nor guard (both sbatch failed: an outage): queue a guard while it runs."""
    job_id, store = environ.get("SLURM_JOB_ID") or "", chain_store(run_dir)
    shell = environ.get("SLURM_TASK_PID")  # the batch shell, if this /proc shows it (namespaces)
    shell = shell if is_digits(shell) and os.path.isdir("/proc/" + shell) else None
    for delay in itertools.chain(RETRY_DELAYS, itertools.repeat(RETRY_DELAYS[-1])):
        sleep(delay)
        if shell and not os.path.isdir("/proc/" + shell):
            return None  # the link ended (the controller forgets an ended job after MinJobAge)
        answer = SLURM.controller(job_id)
        if answer.job is not None and base_state(answer.job.state) != "RUNNING":
            return None  # its end: nothing guards it (status says broken; resume continues)
        with store.locked():
            record = store.read_record()
            if record is None or record.job != job_id or record.successor or record.guarded_by:
                return None
            guard = queue_guard(job_id, run_dir, (record.next or {}).get("job_name"), environ,
                                again=True)[0]
            if guard:
                store.write_record(record._replace(guarded_by=guard))
                return guard


def work_finished(run_dir, environ, now=time.time):
    """After the script exited 0: the chain finished, unless Slurm is ending the job (bash runs
    the trap with the last command's status when a signal kills it)."""
    job_id, store, warnings = environ.get("SLURM_JOB_ID"), chain_store(run_dir), []
    answer = SLURM.controller(job_id or "")
    if answer.job is None:
        return None, None, ["cannot tell whether the chain finished (%s): status will say"
                            % answer.error]
    if base_state(answer.job.state) != "RUNNING":
        return None, None, warnings
    with store.locked():
        record = store.read_record()
        if record is None or record.job != job_id or record.action not in WORK_ACTIONS:
            return None, None, warnings  # not this chain's current link: nothing to say
        event = journal_event(store, Event("finished", job_id, record.link, "job %s (link %s) "
                                           "completed its work" % (job_id, record.link),
                                           int(now())), warnings)
    return event, record.notify, warnings


def finished_command(run_dir):
    """The rendered exit trap's step once the work exited 0: the chain finished."""
    run_dir = task_run_dir(run_dir, os.environ)
    event, command, warnings = work_finished(run_dir, os.environ)
    _log(*warnings)
    if event and command:
        _log(notify(command, event, run_dir))
    return 0


def guard_command(run_dir, job, *defaults, after=None):
    """The step of the guard of JOB. The user's SBATCH_* variables: the guard is queued without
    them, its links get them back (KEPT_SBATCH; SBATCH_NAME=VALUE words: 0.7's guards)."""
    if not all(map(is_job_id, [job] if after is None else [job, after])) or not all(
            word.startswith("SBATCH_") and "=" in word for word in defaults):
        raise ValueError("guard: give DIR, the JOB it guards, --after=LINK and SBATCH_NAME=VALUE "
                         "defaults (a link queues this by itself)")
    run_dir = os.path.abspath(run_dir)
    check_owned_dir(run_dir)
    os.environ.update(word.split("=", 1) for word in defaults)
    os.environ.update(("SBATCH_" + name[len(KEPT_SBATCH):], os.environ.pop(name)) for name in [
        name for name in os.environ if name.startswith(KEPT_SBATCH)])
    # Slurm's SIGTERM (a preemption, a cancel) waits while a look acts, then ends guard_chain's
    # sleep: a look is never cut half-done. Slurm's commands inherit the mask (they are short).
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
    event, command, words = guard_chain(run_dir, job, os.environ, after=after)
    _log("%s guard %s of job %s: %s" % (time.strftime("%Y-%m-%dT%H:%M:%S"),
                                        os.environ.get("SLURM_JOB_ID", "?"), job, words))
    if event and command:
        _log(notify(command, event, run_dir))
    return 0


def sleep_until_term(seconds):
    """Sleep; True if SIGTERM (which guard_command blocks) came before or meanwhile."""
    return signal.sigtimedwait([signal.SIGTERM], seconds) is not None


def guard_chain(run_dir, job_id, environ, sleep=sleep_until_term, clock=time.monotonic, after=None):
    """JOB ended: continue the chain if it waits on JOB (``after``: the link that queued it)."""
    store, started = chain_store(run_dir), clock()
    for delay in itertools.chain(RETRY_DELAYS, itertools.repeat(RETRY_DELAYS[-1])):
        final = clock() + delay > started + GUARD_TRIES_SECONDS
        done, result = _guard_once(store, job_id, environ, final, after, clock() - started)
        if done or final:
            return result
        if not sleep(delay):
            continue
        # SIGTERM: preempted (a PreemptTime; PreemptMode=CANCEL ignores its --requeue), it requeues
        # itself, as nothing else would look again (chaos run 13 lost 2 chains so; how-it-works.md)
        answer = SLURM.run(["scontrol", "show", "job", "-o", environ.get("SLURM_JOB_ID") or ""])
        fields = scontrol_fields(answer.stdout)
        if _known(fields.get("PreemptTime")) and _requeue_guard(environ):
            return None, None, result[2] + "; preempted: it looks again once Slurm has requeued it"
        return None, None, "%s; it ended %s" % (
            result[2], fields.get("JobState") or last_line(answer.stderr))


def _requeue_guard(environ):
    """Requeue this guard (its slot kept, idempotent), at most GUARD_REQUEUES times."""
    return int(environ.get("SLURM_RESTART_COUNT") or 0) < GUARD_REQUEUES and not SLURM.error(
        ["scontrol", "requeue", environ.get("SLURM_JOB_ID", "")])


# The guard's situations (_guard_situation, then _guard_ending): (whether this look is its last:
# True, False, "trusted": once its view is old enough, "final": its last look gives up; words),
# or (None, what _guard_once's function does, waiting for a trusted view unless none can undo it).
GUARD_SITUATIONS = {
    "chain cancelled": ("trusted", "nothing to guard: the chain was cancelled{lag}"),
    "not named": ("trusted", "nothing to guard: the chain does not name job {job}{lag}"),
    "went on": (True, "nothing to guard: the chain went on past job {job}"),
    "orphan": (None, "queue the guard of the link it went on to (no successor, no guard)"),
    "queued": (True, "nothing to guard: job {job} ran its prologue and queued job {successor}"),
    "decided": (True, "nothing to guard: job {job} ran its prologue and decided {action}"),
    "uncovered": (None, "be the guard of its successor, which has none"),
    "lost": ("final", "cannot tell how job {job} ended: neither the controller nor accounting "
             "knows it"),
    "first job lost": ("final", "cannot tell how job {job}, the chain's first job, ended: "
                       "neither the controller nor accounting knows it"),
    "not ended": (True, "job {job} is {state}: its own prologue goes on"),
    "first job not ended": (True, "job {job} is {state}: nothing to do"),
    "cancelled unstarted": (None, "journal why the chain stops or finished"),
    "view lags": (False, "job {job} ended {state}; looking again before acting (the run "
                  "directory's view may lag)"),
    "ran": (None, "replace the successor it did not queue"),
    "died": (None, "replace it (the first job, a successor, a link resume queued)"),
}
# One look of the guard at its job (``state``: the journal's record, or submit's for the first).
GuardLook = collections.namedtuple("GuardLook", "store state job_id job environ final trusted")


def _guard_once(store, job_id, environ, final, after=None, looked=0):
    """One look under the lock: (over, (event, command, words))."""
    os.listdir(store.directory)  # refreshes an NFS client's cache of the directory
    trusted = final or looked >= view_wait(store.directory)
    with store.locked():
        snapshot, _ = wait_for_view(store, store.snapshot(), lambda now: view_lags(now, after))
        record, job = snapshot.record, None
        submitted = store.read_submitted() if record is None and not snapshot.cancelled else None
        situation = _guard_situation(snapshot, submitted, job_id)
        if situation == "ended":
            job = SLURM.final(job_id)
            situation = _guard_ending(snapshot, job, trusted)
        look = GuardLook(store, record or submitted, job_id, job, environ, final, trusted)
        over, words = GUARD_SITUATIONS[situation]
        if over is None:
            return {"orphan": _guard_adopts, "uncovered": _guard_covers, "ran": _guard_ran,
                    "cancelled unstarted": _guard_cancelled, "died": _guard_died}[situation](look)
        words = words.format(job=job_id, state=job and job.state, successor=record and
                             record.successor, action=record and record.action, lag="" if
                             trusted else "; looking again (the run directory's view may lag)")
        if over == "final" and final:
            return True, _guard_gives_up(look, words)
    return {"trusted": trusted, "final": final}.get(over, over), (None, None, words)


def _guard_situation(snapshot, submitted, job_id):
    """The guard's situation from the journal; pure."""
    record = snapshot.record
    if snapshot.cancelled:  # resumable-chain cancel: nothing continues the chain
        return "chain cancelled"
    if submitted and submitted.get("first_job") == job_id:
        return "ended"
    if record is not None and record.predecessor == job_id:
        working = record.action in WORK_ACTIONS
        return "orphan" if working and not (record.successor or record.guarded_by) else "went on"
    if record is None or job_id not in (record.job, record.successor):
        return "not named"
    if record.job == job_id and record.action not in WORK_ACTIONS:
        return "decided"
    if record.job == job_id and record.successor:
        return "queued" if record.guard else "uncovered"
    return "ended"


def _guard_ending(snapshot, job, trusted):
    """The guard's situation once the chain waits on ``job`` (None: nobody knows it); pure."""
    record = snapshot.record
    if job is None:
        return "first job lost" if record is None else "lost"
    unstarted = base_state(job.state) == "CANCELLED" and job.nodes is None
    if record is None:  # the chain's first job
        return "first job not ended" if not is_final(job.state) or unstarted else \
            "died" if trusted else "view lags"
    if not is_final(job.state):
        return "not ended"
    resumed = record.job == job.job_id and record.source == "resume" and \
        snapshot.last_job != job.job_id  # a link resume queued that never ran its prologue
    if unstarted and (resumed or record.successor == job.job_id):  # nothing newer can exist
        return "cancelled unstarted"
    if not trusted:
        return "view lags"
    return "ran" if record.job == job.job_id and not resumed else "died"


def _guard_adopts(look):
    """The chain went on to a link without successor or guard: queue its guard, or be it."""
    store, record, final = look.store, look.state, look.final
    if not look.trusted:
        return False, (None, None, "the chain went on to job %s, which shows no successor and "
                       "no guard; looking again (the view may lag)" % record.job)
    orphan = SLURM.final(record.job)
    if orphan is not None and is_final(orphan.state):  # no guard can come now: be it
        return _guard_ran(look._replace(job=orphan))
    guard, error = queue_guard(record.job, store.directory, (record.next or {}).get(
        "job_name"), look.environ, again=True)
    words = "the chain went on to job %s, which had neither a successor nor a guard" % record.job
    if guard:
        store.write_record(record._replace(guarded_by=guard))
        return True, (None, None, "%s: queued its guard %s" % (words, guard))
    return final, (None, None, "%s; sbatch failed (%s)%s" % (
        words, error, "; it keeps trying while it runs" if final else ", trying again"))


def _guard_covers(look):
    """The link ended before its successor had a guard: be that guard."""
    store, record, final = look.store, look.state, look.final
    words = "job %s ended before its successor %s had a guard" % (record.job, record.successor)
    if not look.trusted:
        return False, (None, None, "%s; looking again before acting (the run directory's view "
                       "may lag)" % words)
    successor = SLURM.final(record.successor)
    if successor is not None and is_final(successor.state):  # cancelled unstarted, or dead
        return (_guard_cancelled if base_state(successor.state) == "CANCELLED" and
                successor.nodes is None else _guard_died)(look._replace(job=successor))
    covered = swap_guard(record, store.directory, look.environ, [], again=True)
    if not (covered.guard or final):
        return False, (None, None, "%s; sbatch failed (%s), trying again" % (
            words, covered.guard_error))
    store.write_record(covered)
    if covered.guard:
        return True, (None, None, "%s: queued guard %s" % (words, covered.guard))
    return True, _guard_gives_up(look, "%s; none could be queued (%s)" % (
        words, covered.guard_error))


def _guard_ran(look):
    job = look.job
    if base_state(job.state) == "COMPLETED":
        return True, (None, None, "job %s COMPLETED: the work is done" % job.job_id)
    return _guard_heals(look, "successor", "job %s ended %s before it queued its successor" % (
        job.job_id, job.state), counted={})


def _guard_died(look):
    """Replaced up to max_retries + 1 times in a row (the first death free) and, not retries, up
    to NODE_DEATHS the cluster caused (how-it-works.md); a person's scancel stops the chain."""
    state, job, first = look.state, look.job, isinstance(look.state, dict)
    field = "first_job" if first else "job" if state.job == job.job_id else "successor"
    died = "job %s%s died before its prologue (%s)" % (job.job_id, {
        "first_job": ", the chain's first job,", "job": ", queued by resume,"}.get(field, ""),
        "%s on %s" % (job.state, job.nodes) if job.nodes else job.state)
    by = base_state(job.state) == "CANCELLED" and SLURM.accounting([job.job_id])[0].get(
        job.job_id)  # only accounting says who cancelled it: ask till the last look
    if by is not False and not (by and is_final(by.state)) and not look.final:
        return False, (None, None, "%s; accounting has not said who cancelled it: looking "
                       "again" % died)
    if by and cancelled_by_person(by.state, job.nodes):
        return (True, (None, None, "%s: a person cancelled it (%s): nothing continues the chain"
                       % (died, _state_words(by.state)))) if first else _guard_cancelled(look, by)
    node = base_state(job.state) in NODE_ENDS
    counter = "node_deaths" if node else "dead_first_jobs" if first else "dead_successors"
    dead = ((state.get(counter) if first else getattr(state, counter)) or 0) + 1
    retries = (state.get("max_retries") if first else state.max_retries) or 0
    if dead <= (NODE_DEATHS if node else retries + 1):
        return _guard_heals(look, field, died, counted={counter: dead})
    who = "first jobs of the chain" if first else "links in place of the one resume queued" if \
        field == "job" else "successors of job %s" % state.job
    whose, allowed = ("the cluster's", "the %d allowed" % NODE_DEATHS) if node else (
        "their own", "max_retries %s allows" % retries)
    return True, _guard_gives_up(look, "%s: %d %s died before their prologue by %s failures, more "
                                 "than %s: not replaced" % (died, dead, who, whose, allowed))


def _guard_cancelled(look, by=None):
    """Cancelled before it started (or as Slurm launched it: ``by``, accounting's Job): no link
    is left to journal ``finished`` or ``stopped`` (how-it-works.md), so the guard does."""
    record, job = look.state, look.job
    resumed = record.job == job.job_id  # only accounting says who cancelled a successor:
    by = None if resumed else by or SLURM.accounting([job.job_id])[0].get(job.job_id) or job
    if resumed:
        kind, reason = "stopped", "job %s, queued by resume, was cancelled %s: the chain does " \
            "not go on" % (job.job_id, "as Slurm launched it" if job.nodes else "before it started")
    elif cancelled_by_person(by.state, job.nodes):
        kind, reason = "stopped", (
            "job %s, the successor of job %s, was cancelled as Slurm launched it (%s): the chain "
            "stops with job %s" if job.nodes else "job %s, the pending successor of job %s, was "
            "cancelled before it started (%s): the chain stops when job %s ends") % (
                job.job_id, record.job, _state_words(by.state), record.job)
    else:
        predecessor = SLURM.final(record.job)
        if predecessor is None or base_state(predecessor.state) != "COMPLETED":
            return True, (None, None, "job %s was cancelled before it started, and job %s is %s: "
                          "nothing continues it" % (job.job_id, record.job, predecessor and
                                                    predecessor.state or "not known"))
        kind, reason = "finished", "job %s (link %s) completed its work; Slurm cancelled its " \
            "successor %s" % (record.job, record.link, job.job_id)
    event = Event(kind, record.job, record.link, reason, int(time.time()))
    return True, (journal_event(look.store, event, []), record.notify, reason)


def _guard_heals(look, field, what, *, counted):
    """Queue the link in place of the guard's job (or keep one a failed sbatch queued) and its
    guard, held, released once recorded in ``field`` (never two: how-it-works.md); journal it."""
    store, state, environ, ended = look.store, look.state, look.environ, look.job.job_id
    first, warnings = field == "first_job", []
    successor, error = queued_successor(ended) if field == "successor" and state.job == ended \
        else (None, None)
    held = successor is None and error is None
    try:  # the held replacement: the first job as submit queued it, or the next link
        if held and first:
            successor = SLURM.submit_held(["--hold", "--no-requeue"] + state["sbatch_args"],
                                          runnable_script(store, state["script"]),
                                          state["script_args"], cwd=state.get("workdir"))[0]
        elif held:
            link = NextLink(**state.next)
            successor = SLURM.submit_held(successor_options(link, "--hold", "--no-requeue"),
                                          runnable_script(store, link.script), link.script_args,
                                          cwd=link.workdir, named=True)[0]
    except StateError as failed:
        error = str(failed)
    if not successor:
        words = "%s; sbatch failed (%s)" % (what, error)
        if field == "successor":
            store.write_record(state._replace(successor_error=error))
        if not look.final:
            return False, (None, None, words + ("" if field == "job" else ", trying again"))
        # no slot frees (a job limit): keep its own
        if JOB_LIMIT_REFUSAL in (error or "") and _requeue_guard(environ):
            return True, (None, None, words + "; your job limit: this guard tries again once "
                          "Slurm has requeued it")
        return True, _guard_gives_up(look, words if field != "successor" else "%s; its "
                                     "guard could not queue the next link (%s)" % (what, error))
    if field == "successor":
        state = swap_guard(state._replace(successor=successor, successor_error=None, **counted),
                           store.directory, environ, warnings)
        store.write_record(state)
    else:
        guard = queue_guard(successor, store.directory, option_value(state["sbatch_args"],
                            "--job-name") if first else (state.next or {}).get("job_name"),
                            environ)[0]
        if first:
            store.write_public(SUBMIT_FILE, dict(state, first_job=successor, guard=guard,
                                                 **counted))
        else:
            store.write_record(state._replace(job=successor, guarded_by=guard, **counted))
    error = held and SLURM.error(["scontrol", "release", successor])
    reason = "%s; %s%s%s" % (what, CONTINUED_WITH, successor, " (held: %s; scontrol release %s)"
                             % (error, successor) if error else "")
    event = journal_event(store, Event("healed", ended, 1 if first else state.link, reason,
                                       int(time.time())), warnings)
    return True, (event, store.read_notify() if first else state.notify,
                  "; ".join([reason] + warnings))


def _guard_gives_up(look, reason):
    """Journal that the chain needs a person (``broken``)."""
    if isinstance(look.state, dict):  # its first job died: nothing to resume
        job, link, notify = look.job_id, 1, look.store.read_notify()
        reason += "; submit again"
    else:
        job, link, notify = look.state.job, look.state.link, look.state.notify
        reason += "; resumable-chain resume continues the chain"
    event = Event("broken", job, link, reason, int(time.time()))
    return journal_event(look.store, event, []), notify, reason


# ---------------------------------------------------------------------------
# 13. Render: the bash snippet a job script runs before its work, and what it checks
# ---------------------------------------------------------------------------

PROLOGUE_TEMPLATE = """\
# >>> resumable_chain {version}: decide, record and queue the successor before any work >>>
resumable_chain_lookup=  # sh, bash --posix: none, the step asks
if [ -n "${{BASH_VERSION-}}" ] && ! shopt -oq posix; then  # quoted: bash alone parses it
    # the predecessor's state, asked as Python starts (run_link): this PID, then what scontrol
    # prints in the environment run_slurm gives it, on a pipe the step reads
    eval 'resumable_chain_ask() {{
        echo "$BASHPID"
        [[ ${{SLURM_JOB_DEPENDENCY-}} =~ ^afternotok:([1-9][0-9]{{0,9}})$ ]] || return 0
        for name in "${{!SLURM_@}}" "${{!SACCT_@}}" "${{!SQUEUE_@}}" "${{!SALLOC_@}}" \\
            "${{!SRUN_@}}" "${{!SBATCH_@}}" RESUMABLE_CHAIN_NAMED; do
            [ "$name" = SLURM_CONF ] || unset "$name"
        done
        LC_ALL=C exec scontrol show job -o "${{BASH_REMATCH[1]}}" </dev/null 2>&1
    }}
    exec {{resumable_chain_fd}}< <(resumable_chain_ask)
    resumable_chain_lookup=/dev/fd/$resumable_chain_fd'
fi
for _ in 1 2; do  # a step killed by a signal runs once more: it is idempotent
    resumable_chain_status=0
    # shellcheck disable=SC2016  # single quotes keep paths and arguments literal on purpose
    resumable_chain_env=$({command}) || resumable_chain_status=$?
    if [ "$resumable_chain_status" -le 128 ]; then break; fi
done
if [ "$resumable_chain_status" -eq {done} ]; then exit 0; fi
if [ "$resumable_chain_status" -ne 0 ]; then exit "$resumable_chain_status"; fi
eval "$resumable_chain_env"  # RESUMABLE_CHAIN_DIR, _LINK, _RESUMING, _WALLTIME_LEFT, ...
if [ -n "$resumable_chain_lookup" ]; then eval 'exec {{resumable_chain_fd}}<&-'; fi
unset resumable_chain_status resumable_chain_env resumable_chain_lookup resumable_chain_fd
unset -f resumable_chain_ask
{finished}# <<< resumable_chain <<<
"""
# With a notify command, a job exiting 0 after its work finished the chain: only it can say so
# (Slurm cancels its successor); a TIMEOUT all the same: the successor ends it (_work_done_before).
FINISHED_TRAP = """\
# shellcheck disable=SC2016  # single quotes keep paths literal on purpose
resumable_chain_finished() {{ if [ "$?" -eq 0 ]; then {command} || true; fi; }}
trap resumable_chain_finished EXIT
"""


def render_prologue(run_dir, *, max_retries=DEFAULT_MAX_RETRIES, max_walltime=None, script=None,
                    sbatch_args=(), python="python3", budget_dir=None, notify=None, warn=None):
    """Return the bash snippet a job script puts after its #SBATCH lines, before any work.

    It runs this module's in-job step and exits the job when the chain ends (0 for complete or
    stop, 1 for fail, 2 for bad state); otherwise it exports RESUMABLE_CHAIN_* variables to the
    work. Creates the run directory (``%a`` in it: each array task's ID, so its parent; a job
    that is no array task refuses it). ``budget_dir``: a walltime budget shared with other chains
    (``resumable-chain budget``), which must exist. ``notify``: a shell command run for each
    chain event; with it, an EXIT trap reports a finished chain when the job exits 0. ``warn``
    (``SIG@SECONDS``): the work gets SIG that long before its link ends. Works with and without
    ``set -euo pipefail``. ``sbatch_args=None``: none (a driver's unset setting)."""
    sbatch_args = () if sbatch_args is None else sbatch_args
    run_dir = check_path(run_dir, "run_dir")
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ValueError("run directory %s exists and is not a directory" % run_dir)
    if not isinstance(python, str) or "\0" in python or python.split() != [python] and not (
            os.sep in python and os.path.isfile(python)):  # a path with a space: one word
        raise ValueError("python must be one word, an interpreter such as python3 or its path "
                         "(the in-job step sets its own flags), got %r" % (python,))
    max_retries, max_walltime = check_max_retries(max_retries), check_max_walltime(max_walltime)
    notify, warn = check_notify(notify), check_warn(warn)
    words = [("max-retries", str(max_retries)), ("max-walltime", max_walltime and format_duration(
        max_walltime))] + [("sbatch-arg", word) for word in check_sbatch_args(sbatch_args)]
    check_warn_fits(warn, sbatch_args, max_walltime)
    budget_dir = None if budget_dir is None else check_path(budget_dir, "budget_dir")
    if budget_dir is not None and not os.path.isfile(os.path.join(budget_dir, BUDGET_FILE)):
        raise ValueError("no shared budget in %s: create it first with resumable-chain budget %s "
                         "--max-walltime T" % (budget_dir, shell_quote(budget_dir)))
    script = None if script is None else os.path.abspath(check_path(script, "script"))
    words += [("script", script), ("budget-dir", budget_dir and os.path.abspath(budget_dir)),
              ("notify", notify), ("warn", warn)]
    argv = step_command("prologue", *["--%s=%s" % word for word in words if word[1] is not None],
                        python=python) + [os.path.abspath(run_dir)]
    try:  # the budget as its links check it (each refusal a failure the guard would replace)
        if budget_dir is not None:
            check_owned_dir(budget_dir, "budget directory")
        # as submit would (its first job checks again, the tree may change); a sweep's: a task's
        check_chain_place(os.path.abspath(run_dir.replace("%a", "0")))
        make_run_dir(made_dir(run_dir))  # Slurm opens #SBATCH --output=<run dir>/... first
    except StateError as error:
        raise ValueError(str(error))
    # no script: the running batch script (Slurm's spool copy)
    command = " ".join(map(shell_quote, argv)) + (' --script="$0"' if script is None else "")
    return PROLOGUE_TEMPLATE.format(
        version=__version__, command=command + ' --lookup="$resumable_chain_lookup" -- ${1+"$@"}',
        done=EXIT_DONE, finished=finished_trap(python, run_dir) if notify else "")


def made_dir(run_dir):
    """The directory render makes: the run directory, or the one above a task's (``%a``)."""
    return (os.path.dirname(run_dir.partition("%a")[0]) or ".") if "%a" in run_dir else run_dir


def finished_trap(python, run_dir):
    """The exit trap that says the chain finished (FINISHED_TRAP), for a chain that notifies."""
    return FINISHED_TRAP.format(command=" ".join(shell_quote(word) for word in step_command(
        "finished", os.path.abspath(run_dir), python=python)))


def parse_walltime(text):
    """Seconds of a positive walltime; ValueError otherwise. Text is read as sbatch reads --time
    (a bare "90" is minutes) or "5400s"; an int is seconds, as every number of the Python API."""
    word = text.strip() if isinstance(text, str) else ""
    seconds = (text if isinstance(text, int) and not isinstance(text, bool) and text > 0
               else int(word[:-1]) if word[-1:] == "s" and is_digits(word[:-1], 12)
               else parse_duration(word))
    if not seconds:
        raise ValueError("invalid walltime %.60r: use a positive %s%s" % (
            text, "" if isinstance(text, str) else "int of seconds, or text: ", DURATION_FORMS))
    return seconds


def parse_resumable(value):
    """Validate a driver's ``resumable:`` setting (False/None: off; True: defaults; a mapping of
    Settings.KEYS): Settings or None; ValueError naming the key and what is allowed."""
    if value is None or value is False:
        return None
    if value is True:
        return Settings()
    given = None
    with contextlib.suppress(TypeError, ValueError, KeyError):
        given = dict(value) if hasattr(value, "keys") else None  # one with keys() and [] only, too
    if given is None:
        raise ValueError("resumable must be true, false or a mapping with max_retries and "
                         "max_walltime, got %r" % (value,))
    unknown = sorted(repr(key) for key in given if key not in Settings.KEYS)
    if unknown:
        raise ValueError("resumable: unknown key %s; allowed keys: max_retries, max_walltime"
                         % ", ".join(unknown))
    retries = given.get("max_retries")  # null (YAML's "max_retries:"): the default, as walltime's
    return Settings(check_max_retries(DEFAULT_MAX_RETRIES if retries is None else retries,
                                      "resumable.max_retries"),
                    check_max_walltime(given.get("max_walltime"), "resumable.max_walltime"))


def check_max_walltime(value, name="max_walltime"):
    """max_walltime in seconds (parse_walltime; None: no cap) that a Slurm time limit can hold."""
    if value is None:
        return None
    try:
        seconds = parse_walltime(value)
    except ValueError as error:
        raise ValueError("%s: %s" % (name, error))
    if seconds < MIN_TIME_LIMIT:
        raise ValueError("%s %r is %d s: under Slurm's 1-minute minimum time limit no link "
                         "could ever run; use at least 60 s (1:00)" % (name, value, seconds))
    if seconds > MAX_TIME_LIMIT:
        raise ValueError("%s %r is more than Slurm can represent (at most %s, %d minutes); "
                         "leave it out for no cap" % (name, value, format_duration(
                             MAX_TIME_LIMIT), MAX_TIME_LIMIT // 60))
    return seconds


def check_path(value, name):
    value = os.fspath(value) if hasattr(value, "__fspath__") else value
    if not isinstance(value, str) or not value or "\0" in value:
        raise ValueError("%s must be a non-empty path, got %r" % (name, value))
    if value.startswith("~") and os.path.expanduser(value) != value:  # a driver's YAML: render
        raise ValueError("%s %s: only a shell expands ~; give %s" % (  # would make a ~ here
            name, value, os.path.expanduser(value)))
    return value


def check_sbatch_environment():
    """ValueError if the environment sets what sbatch takes as a refused option."""
    for name, option in sorted(REFUSED_SBATCH_ENV.items()):
        if name in os.environ:
            raise ValueError("%s is set in your environment: sbatch would take it as %s: %s; "
                             "unset it" % (name, option, REFUSED_SBATCH_OPTIONS[option]))


def check_paths(values, name):
    """``values``, a list of paths; ValueError for one string (its characters are no list)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise ValueError("%s must be a list of paths, got %r" % (name, values))
    return [check_path(value, "each of " + name) for value in values]


def resolve_option(word, value_options=SBATCH_VALUE_OPTIONS,
                   other_options=SBATCH_OTHER_OPTIONS):
    """(full name, the word spelled with it, whether the next word is its value), as sbatch's
    getopt_long reads ``--part=debug`` (``--partition=debug``); ValueError if unknown or
    ambiguous, but a site plugin's ``--name=value`` (sbatch judges it)."""
    if not word.startswith("--"):
        if word[:2] in other_options and len(word) > 2:  # sbatch's getopt: -vH is -v -H
            raise ValueError("%s: write sbatch's short options one per word (%s -%s ..., as "
                             "the chain checks each)" % (word, word[:2], word[2]))
        if word[:2] in value_options or word[:2] in other_options:
            return word[:2], word, len(word) == 2 and word[:2] in value_options
        raise ValueError("unknown option %s: sbatch (22.05, 24.11, 26.05) has no such short "
                         "option" % word[:2])
    name, equals, value = word.partition("=")
    if name == "--":  # every long option would match: say what it is instead
        raise ValueError("unexpected '--': write sbatch options as they are, with no '--' before "
                         "them")
    matches = [name] if name in value_options or name in other_options else sorted(
        full for full in value_options | other_options if full.startswith(name))
    if len(matches) > 1:
        raise ValueError("ambiguous option %s: it could be %s" % (name, ", ".join(matches)))
    if not matches:
        if equals:
            return name, word, False
        raise ValueError(own_option(name) or "unknown option %s%s: neither sbatch (22.05, "
                         "24.11, 26.05) nor resumable-chain has it (a site plugin's option can be "
                         "written %s=VALUE or go in the script's #SBATCH lines)" % (
                             name, did_you_mean(name, value_options | other_options), name))
    return matches[0], matches[0] + equals + value, not equals and matches[0] in value_options


def option_value(arguments, option):
    return (option_values(arguments, option) or [None])[-1]


def named_export(options, script):
    """sbatch options that carry NAMED_ENV into a job that gets less than the whole environment."""
    spec = option_value(options, "--export") or os.environ.get("SBATCH_EXPORT")
    with contextlib.suppress(StateError, ValueError):  # sbatch says why it cannot read it
        spec = spec or option_value(script_directives(read_batch_script(script)[0]), "--export")
    if not spec or spec.split(",")[0].upper() == "ALL":
        return []
    return ["--export=%s,%s=1" % (spec, NAMED_ENV)]


def option_names(arguments):
    return set(group[0] for group in option_groups(arguments))


def split_batch_script(text):
    """Return (header, body): the #! line with the #SBATCH/comment block, and the rest."""
    lines = text.splitlines(True)
    if not lines or not lines[0].startswith("#!"):
        raise ValueError("not a batch script: it must start with a #! line such as #!/bin/bash")
    end = next((index for index in range(1, len(lines)) if lines[index].strip()
                and not lines[index].lstrip().startswith("#")), len(lines))
    return "".join(lines[:end]), "".join(lines[end:])


def script_directives(header):
    import shlex
    options = []
    for line in header.splitlines():
        words = line.strip().split(None, 1)
        if len(words) == 2 and words[0] == "#SBATCH":
            with contextlib.suppress(ValueError):  # sbatch ignores what it cannot parse too
                options += shlex.split(words[1], comments=True)
    return options


# ---------------------------------------------------------------------------
# 14. Operations: status, cancel, submit, resume (they return data; main prints), and the
#     Slurm queries they make
# ---------------------------------------------------------------------------


def queued_guard(job_id):
    """job_id's pending guard (a killed run's, a timed-out sbatch's), or None."""
    with contextlib.suppress(StateError):
        return parse_guard(SLURM.mine("%i|%E"), job_id)


def parse_squeue(text):
    jobs = []
    for job_id, state, elapsed, start, limit, dependency, reason in _rows(text, 7):
        predecessor = None
        with contextlib.suppress(ValueError):  # "(unfulfilled)" and such are dropped
            predecessor = parse_dependency(dependency)
        jobs.append(Job(job_id, state, parse_duration(elapsed) or 0, start=_known(start),
                        time_limit=parse_duration(limit), predecessor=predecessor,
                        reason=None if reason in ("", "None", "(null)") else reason))
    return jobs


def _rows(text, width):
    rows = [line.strip().split("|") for line in (text or "").splitlines()]
    return [fields for fields in rows if len(fields) == width and is_job_id(fields[0])]


def parse_guard(text, job_id):
    """The guard of job_id in ``squeue -h -o %i|%E`` output (``afterany:<job_id>``), or None."""
    return next((guard for guard, dependency in _rows(text, 2)  # an array's ID: afterany:ID_*
                 if dependency.split("(")[0].rstrip("_*") == "afterany:%s" % job_id), None)


def parse_held_by_script(text, script):
    """Job IDs held by their user whose batch script is ``script`` (``squeue -h -o %A|%o|%r``;
    22.05 shows the script's arguments after it, which may hold a "|")."""
    held = []
    for line in (text or "").splitlines():
        job_id, _, rest = line.strip().partition("|")
        command, _, reason = rest.rpartition("|")
        if is_job_id(job_id) and reason == "JobHeldUser" and (command + " ").startswith(
                script + " "):
            held.append(job_id)
    return held


def parse_partition(text, name=None):
    """(name, seconds a job without --time gets) of partition ``name`` or the default, or None."""
    for line in (text or "").splitlines():
        fields = dict(word.partition("=")[::2] for word in line.split())
        if fields.get("PartitionName") == name if name else fields.get("Default") == "YES":
            return fields.get("PartitionName"), parse_duration(fields.get(
                "DefaultTime", "")) or parse_duration(fields.get("MaxTime", ""))
    return None


def parse_config(text):
    """{name: value} of ``scontrol show config`` (``AccountingStorageEnforce = limits``)."""
    pairs = (line.partition("=")[::2] for line in (text or "").splitlines())
    return {key.strip(): value.strip() for key, value in pairs if value.strip()}


def submit_limits(assoc_text, qos_text, cluster, account=None, qos=None):
    """[(jobs, whose)]: the limits docs/arrays.md names, from sacctmgr's associations
    (``format=cluster,account,user,maxsubmit,defaultqos``) and QOS (``format=name,maxsubmitpu``)."""
    limits, names = [], {qos} if qos else set()
    for fields in (line.split("|") for line in (assoc_text or "").splitlines()):
        if len(fields) != 5 or fields[0] != cluster or account and fields[1] != account:
            continue
        if is_digits(fields[3], 9):
            limits.append((int(fields[3]), "MaxSubmitJobs of association %s" % fields[1]))
        names.add(qos or fields[4] or "normal")
    for fields in (line.split("|") for line in (qos_text or "").splitlines()):
        if len(fields) == 2 and fields[0] in names and is_digits(fields[1], 9):
            limits.append((int(fields[1]), "MaxSubmitJobsPerUser of QOS %s" % fields[0]))
    return sorted(limits)


def sweep_beyond_limit(tasks, limits, queued):
    """Why ``tasks`` tasks can't fit their least job limit beside ``queued`` jobs, or None."""
    most, whose = limits[0] if limits else (None, None)
    if most is None or tasks * JOBS_PER_TASK <= most - queued:
        return None
    return ("%d tasks need up to %d jobs queued at once (%d per task: its link, the link's "
            "successor and the successor's guard), and your %s is %d with %d of your jobs "
            "queued: at most %d tasks fit" % (tasks, tasks * JOBS_PER_TASK, JOBS_PER_TASK, whose,
                                              most, queued, max(most - queued, 0) // JOBS_PER_TASK))


def uid_name(uid):
    """``0`` -> ``root``: who ``CANCELLED by <uid>`` was (the uid itself if unknown here)."""
    import pwd
    try:
        return pwd.getpwuid(int(uid)).pw_name
    except (KeyError, ValueError, OverflowError, TypeError):  # TypeError: None, not known
        return "uid %s" % uid


def cluster_to_ask(recorded, ask_here=current_cluster):
    """(cluster for -M, note naming both) or (None, None); ``ask_here`` names this shell's."""
    here = recorded and ask_here()
    if here == recorded:  # or no cluster named: this shell's, asked without -M
        return None, None
    return recorded, ("the chain runs on cluster %s; this shell's Slurm commands reach cluster "
                      "%s, so they ask with -M %s" % (recorded, here or "(unknown)", recorded))


def announce(store, event, command):
    """Journal an event under the lock, then run the notify command if it is new; lines to log."""
    warnings = []
    try:
        with store.locked():
            event = journal_event(store, event, warnings)
    except StateError as error:  # e.g. someone who cannot write the directory
        return ["event %s not journaled, not notified: %s" % (event.event, error)]
    return warnings + ([notify(command, event, store.directory)] if event and command else [])


def chain_in(run_dir, store=None):
    """The Chain in run_dir, its unreadable files in ``problems``; StateError if it holds none."""
    if not os.path.isdir(run_dir):  # a missing one reads as a chain of no files
        raise no_directory(run_dir)
    chain = read_chain(store or chain_store(run_dir))
    if not (chain.jobs or chain.record.job or chain.submitted or chain.problems):
        raise not_a_chain(run_dir)
    return chain


def refuse_live(run_dir, live, refused):
    if live:
        raise StateError("the chain in %s is live (%s): %s" % (run_dir, ", ".join(
            "job %s %s" % (job.job_id, job.state) for job in live), refused))


def no_directory(path):
    """The error for a path that is no directory: missing (a typo), not seen, or something else."""
    try:
        os.lstat(path)
    except OSError as error:  # EACCES: a directory on the way others may not search
        return StateError("%s %s" % (path, "does not exist" if error.errno == errno.ENOENT else
                                     "cannot be seen (%s)" % error.strerror))
    return StateError("%s is not a directory" % path)


def not_a_chain(run_dir):
    """The error for a directory without a chain, naming the chains below it (a sweep's tasks)."""
    below = []
    with contextlib.suppress(OSError):  # not the caller's to look into: no chain of theirs there
        below = [os.path.relpath(path, run_dir) for path in _chains_below(run_dir, CHAIN_DEPTH)]
    depths = sorted(set(name.count(os.sep) for name in below))
    named = [os.path.join(*["*"] * (depths[0] + 1))] if len(depths) == 1 else below[:3] + [
        "..."] * (len(below) > 3)  # one glob when they are all as deep, else the first ones
    return StateError("%s is not a chain made by resumable_chain%s" % (run_dir, below and (
        "; %d chain(s) are below it (status lists them): name them, e.g. %s" % (
            len(below), " ".join(name if name == "..." else shell_quote(run_dir) + "/" + name
                                 for name in named))) or " and no directory below it holds one "
        "(a pasted prologue writes a chain's files when its first job starts)"))


def query_jobs(job_ids, cluster=None):
    """({job ID: Job}, [what did not answer]): sacct, then squeue for the jobs not final."""
    slurm = Slurm(cluster)
    found, error = slurm.accounting(job_ids)
    errors = ["sacct: %s" % error] if error else []
    for chunk in chunks([job_id for job_id in job_ids if job_id not in found or not is_final(
            found[job_id].state)]):  # one failed chunk costs its own rows alone
        try:
            found.update((job.job_id, job) for job in slurm.jobs(chunk))
        except StateError as failed:
            errors.append(str(failed))  # "squeue failed: ..."
    return found, errors


def cancelled_by_person(state, nodes):
    """Whether accounting says a person cancelled the job: "CANCELLED by UID", not Slurm's plain
    CANCELLED nor root's on a job with nodes (a failed node Prolog: docs/how-it-works.md)."""
    return base_state(state) == "CANCELLED" and state != "CANCELLED" and not (
        nodes and state == "CANCELLED by 0")


def _state_words(state):
    """``CANCELLED by 0`` -> ``CANCELLED by root (uid 0)``: say whose cancel it was."""
    words = (state or "").split()
    if len(words) == 3 and words[:2] == ["CANCELLED", "by"] and is_digits(words[2]):
        return "CANCELLED by %s (uid %s)" % (uid_name(words[2]), words[2])
    return state


def chain_dirs(paths):
    """The run directories ``paths`` name: each a chain, or chains below it (operators-guide.md)."""
    found = collections.OrderedDict()  # realpath: the path shown
    for path in check_paths(paths, "paths"):
        whole = holds_chain(path)
        if not (whole or os.path.isdir(path)):
            raise no_directory(path)
        try:
            children = [path] * whole + (_chains_below(path, CHAIN_DEPTH) if not whole or
                                         open_to_others(path) else [])
        except OSError as error:
            raise StateError("cannot list %s: %s" % (path, error.strerror or error))
        if not children:
            raise not_a_chain(path)
        for child in children:  # runs/latest -> runs/sweep/a is one chain, shown by its name
            real = os.path.realpath(child)
            if real not in found or os.path.islink(found[real]) and not os.path.islink(child):
                found[real] = child
    return list(found.values())


def chain_status(run_dir):
    """The status of the chain in run_dir as a dict (what ``status --json`` prints)."""
    return chains_status([check_path(run_dir, "run_dir")], rows=STATUS_ROWS)[0]


# What status keeps of a chain till Slurm answers (_roles): its links shown (``links``: how many),
# ``roles`` {job ID: role} of the verdict's jobs, ``others`` {job ID: (role, note)} of rows to see
# (guards, dead successors, what guards queued), ``ran`` of the journal's guard, cluster_to_ask's.
StatusPlan = collections.namedtuple("StatusPlan", "run_dir chain links roles others ran "
                                                  "cluster note")


def _reading_order(run_dirs):
    """[(bytes status reads, owner, run_dir)] in an order no one can game (trust-model.md)."""
    costs, ranks, keyed = [], collections.Counter(), []
    for run_dir in run_dirs:  # (bytes status reads at most, owner, run_dir)
        paths = [os.path.join(run_dir, name) for name in (CHAIN_FILE, JOURNAL_FILE, SUBMIT_FILE,
                                                           EVENTS_FILE, GUARD_LOG)]
        try:
            costs.append((sum(min(os.stat(path).st_size, MAX_STATE_BYTES) for path in paths
                              if os.path.exists(path)), os.stat(run_dir).st_uid, run_dir))
        except OSError:
            costs.append((0, -1, run_dir))
    for size, owner, run_dir in sorted(costs):
        keyed.append(((owner != os.getuid(), ranks[owner], size, run_dir), owner))
        ranks[owner] += 1
    return [(key[2], owner, key[3]) for key, owner in sorted(keyed)]


def chains_status(run_dirs, rows=COLLECTION_ROWS):
    """The status of each chain (``rows`` newest links each) from one scontrol show config, one
    sacct, at most one squeue per cluster and one report per budget, within STATUS_SECONDS (a
    colleague's state files could name thousands of clusters and budgets)."""
    budgets, plans, wanted, run_dirs = {}, {}, collections.OrderedDict(), check_paths(
        run_dirs, "run_dirs")
    deadline, spent = time.monotonic() + STATUS_SECONDS, 0
    here = functools.lru_cache(maxsize=None)(current_cluster)  # asked once, if a chain names one
    late = "not read: status ran out of its %d s or %d MiB" % (STATUS_SECONDS, STATUS_BYTES >> 20)
    for size, owner, run_dir in _reading_order(run_dirs):  # Slurm gets the second half of time
        spent += size
        try:
            if time.monotonic() > deadline - STATUS_SECONDS / 2 or spent > STATUS_BYTES:
                raise StateError(late)
            store = chain_store(run_dir)
            store.owner = owner
            chain = chain_in(run_dir, store)
            copy = copied_from(store, chain.record, chain.submitted)  # another's jobs
            if copy:
                raise Copied(run_dir, copy)
            plan = StatusPlan(run_dir, chain._replace(jobs=chain.jobs[-rows:]), len(chain.jobs),
                              *(_roles(chain, rows) + cluster_to_ask(chain.record.cluster, here)))
            wanted.setdefault(plan.cluster, collections.OrderedDict()).update(
                (job, None) for job in [*plan.roles, chain.guard(), *plan.others] if job)
        except Exception as error:  # one damaged chain is one row, never the whole table
            plan = unreadable_status(run_dir, error)
        plans[run_dir] = plan
    answers = {cluster: query_jobs(list(job_ids), cluster=cluster) if time.monotonic() <= deadline
               else None for cluster, job_ids in wanted.items()}
    statuses = []
    for plan in (plans[run_dir] for run_dir in run_dirs):
        try:
            if isinstance(plan, StatusPlan) and answers[plan.cluster] is None:
                raise StateError(late)
            statuses.append(_status_of(plan, answers[plan.cluster], budgets, deadline)
                            if isinstance(plan, StatusPlan) else plan)
        except Exception as error:
            statuses.append(unreadable_status(plan.run_dir, error))
    return statuses


def unreadable_status(run_dir, error):
    problem = str(error) if isinstance(error, StateError) else (
        "cannot read the chain safely (%s: %s)" % (type(error).__name__, error))
    situation = "copied" if isinstance(error, Copied) else "unreadable" if holds_chain(
        run_dir) or os.path.isdir(run_dir) and not os.access(run_dir, os.R_OK | os.X_OK) else \
        "no chain"
    verdict = _verdict_of(situation, {"problem": problem, "home": shell_quote(getattr(
        error, "home", "")), "run_dir": shell_quote(os.path.abspath(run_dir))})
    return dict(dict.fromkeys(("max_walltime", "walltime_left", "max_retries", "successor",
                               "guard_error", "guard", "pending_successor", "cancelled", "budget",
                               "cluster", "cluster_note", "would_not_continue", "task")),
                run_dir=os.path.abspath(run_dir), jobs=[], links=0, walltime=0,
                walltime_uncounted=0, walltime_used=0, retries=0, problems=[problem],
                slurm_errors=[], lock={"kind": "unknown", "why": None}, events=[],
                verdict_word=verdict.word, verdict=verdict.text, next=verdict.next,
                attention=verdict.text)


def guards_that_ran(store):
    """[(guard, job it guarded, what it did)], oldest first, from GUARD_LOG's last MiB or []."""
    text = b""  # a log others could have written (own_guard_log) holds no guard's lines
    with contextlib.suppress(StateError, OSError):  # none yet, or not readable
        if not foreign_write(os.stat(store.path(GUARD_LOG)), store.path(GUARD_LOG)):
            text = store.read_bytes(GUARD_LOG, tail=MAX_STATE_BYTES) or b""
    found = []  # from lines "resumable-chain: TIME guard GUARD of job JOB: WHAT"
    for line in text.decode("utf-8", "replace").splitlines():
        words = line.split(" ", 6)
        if len(words) == 7 and words[2] == "guard" and words[4:6] == ["of", "job"]:
            guarded, _, what = words[6].partition(": ")
            if is_job_id(words[3]) and is_job_id(guarded):
                found.append((words[3], guarded, what))
    return found


def _roles(chain, rows):
    """StatusPlan's roles, others (one chain's) and ran, from one read of GUARD_LOG."""
    record, guards, others = chain.record, guards_that_ran(chain.store), collections.OrderedDict()
    roles = collections.OrderedDict((job, "link") for job in chain.jobs[-rows:])
    if record.job and record.job not in roles:
        roles[record.job] = "decided" if record.action not in WORK_ACTIONS else "resumed link"
    if record.successor and record.successor not in roles:
        roles[record.successor] = "successor" if record.job else "first job"
    ran = [what for guard, _, what in guards if guard == record.guard]
    if rows <= COLLECTION_ROWS:  # a collection's rows: the verdict's jobs alone
        return roles, others, ran
    for guard, guarded, what in guards:
        others[guard] = ("guard", "ran once job %s ended: %s" % (guarded, what))
        queued = what.partition(CONTINUED_WITH)[2].split(" ")[0].rstrip(";,")
        dead = guarded not in chain.jobs and guarded != record.successor
        if dead and queued:
            others.setdefault(guarded, ("dead successor", "died before its prologue; job %s "
                                        "replaced it" % queued))
        if is_job_id(queued):
            others.setdefault(queued, ("replacement" if dead else "successor", "queued by "
                                       "guard %s" % guard))
    guard = chain.guard()
    if guard:
        others.setdefault(guard, ("guard", "replaces job %s if it dies before its prologue"
                                  % record.successor if record.job is None else
                                  "continues the chain if job %s dies before its prologue"
                                  % record.successor if guard == record.guard else
                                  "queues the successor of job %s when it ends" % record.job))
    return roles, others, ran


def _status_of(plan, answer, budgets, deadline):
    """One chain's status from ``answer`` ({job ID: Job}, errors) and the budgets read so far."""
    chain, record, (known, unanswered) = plan.chain, plan.chain.record, answer
    rows = [_status_row(known.get(job_id) or Job(job_id, "UNKNOWN"), role, record)
            for job_id, role in plan.roles.items()]
    # the last link's time while the walltime file lacks it (running, or never continued)
    last = record.job if record.action in WORK_ACTIONS and chain.jobs[-1:] == [record.job] else 0
    uncounted = next((row["elapsed"] for row in rows if row["job"] == last and row["link"] and
                      base_state(row["state"]) not in ("PENDING", "UNKNOWN")), 0)
    walltime = None if "walltime" in chain.unread else chain.walltime or 0
    used = None if walltime is None else walltime + uncounted
    guard_id = chain.guard()
    guard = guard_id and (known.get(guard_id) or Job(guard_id, "UNKNOWN"))
    task = option_value((record.next or {}).get("sbatch_args") or (), "--array")
    if record.budget_dir and record.budget_dir not in budgets:  # each budget read once
        try:
            if time.monotonic() > deadline:
                raise StateError("budget %s not read: status ran out of its %d s"
                                 % (record.budget_dir, STATUS_SECONDS))
            budgets[record.budget_dir] = budget_report(record.budget_dir), []
        except StateError as error:
            budgets[record.budget_dir] = None, [str(error)]
    budget, unread = budgets.get(record.budget_dir, (None, []))
    kind, why = probe_lock(plan.run_dir)
    status = {"run_dir": os.path.abspath(plan.run_dir), "jobs": rows, "links": plan.links,
              "walltime": walltime, "walltime_uncounted": uncounted,
              "walltime_used": used, "max_walltime": record.max_walltime,
              "walltime_left": (max(record.max_walltime - used, 0) if None not in (
                  record.max_walltime, used) else None),
              "retries": None if "retries" in chain.unread else chain.retries or 0,
              "max_retries": record.max_retries,
              "successor": record.successor, "guard_error": record.guard_error,
              "guard": guard and {"job": guard.job_id, "state": guard.state, "nodes": guard.nodes},
              "pending_successor": next((row["job"] for row in rows if row["role"] == "successor"
                                         and base_state(row["state"]) == "PENDING"), None),
              "cancelled": chain.cancelled, "budget": budget, "problems": [
                  str(one) for one in chain.problems] + [why] * (kind == "refused") + unread,
              "slurm_errors": list(unanswered), "cluster": record.cluster,
              "cluster_note": plan.note, "lock": {"kind": kind, "why": why},
              "would_not_continue": _nothing_continues(record, rows, chain),
              "events": [event._asdict() for event in chain.events],
              "task": int(task) if task else None}  # an array task's chain: its task
    verdict = _verdict(record, rows, status, chain)
    unreadable = status["problems"] if verdict.word not in ("finished", "stopped") else \
        chain.problems  # an ended chain's own files (a lost event too: --check says so)
    status.update(verdict_word=verdict.word, verdict=verdict.text, next=verdict.next,
                  attention=verdict.text if verdict.fails else unreadable and
                  status["problems"][0] or None)  # each says what it is and what to do
    refused = [problem for problem in chain.problems if not isinstance(problem, LostEvents)]
    if kind == "refused" and verdict.next:  # resume refuses till it is fixed
        status["next"] = "fix the run directory as said above, then: " + verdict.next
    elif refused and record.job is not None and chain.jobs:  # else it is the verdict; ended too
        status["next"] = "fix the file named above as its problem says" + (
            verdict.next and ", then: " + verdict.next or "")
    if status["next"] and verdict.word != "unknown" and chain.store.owner != os.geteuid():
        # the owner's step (resume, cancel, a fix): the chain refuses anyone else
        status["next"] = "for its owner (%s): %s" % (uid_name(chain.store.owner), status["next"])
    _show_other_jobs(status, plan, known)
    return status


def _show_other_jobs(status, plan, known):
    record, rows, ran = plan.chain.record, list(status["jobs"]), plan.ran
    shown = dict((row["job"], row) for row in rows)
    for job_id, (role, note) in plan.others.items():
        row = shown.get(job_id)
        if row:  # a link or successor that a guard queued: say so (a link stays one)
            row.update(role="link" if row["link"] else role,
                       note="; ".join(words for words in (note, row["note"]) if words))
        else:
            job = known.get(job_id) or Job(job_id, "UNKNOWN")
            ended = job_id == record.guard and is_final(job.state) and not ran  # e.g. cancelled
            rows.append(dict(_status_row(job, role, record), note=None if ended else note))
    status["jobs"] = sorted(rows, key=lambda row: int(row["job"]))
    if status["guard"] and ran:
        status["guard"]["ran"] = ran[-1]


def _status_row(job, role, record):
    state = base_state(job.state)
    note = None
    if role == "successor" and job.state == "CANCELLED" and not job.elapsed:  # 23.02+: a Start
        note = "cancelled by Slurm before it ran: its predecessor completed (expected)"
    elif role == "decided":
        note = "ran no work: decided %s" % record.action
    elif role == "resumed link" and state == "PENDING":
        note = "queued by the resume command" + (
            ", pending: %s" % job.reason if job.reason else "")
    elif state.startswith("CANCELLED") and job.state != "CANCELLED":
        note = _state_words(job.state)
    elif state == "PENDING" and job.reason:
        note = "pending: %s" % job.reason
    elif role == "link" and is_final(job.state) and state not in ("CANCELLED", "UNKNOWN"):
        note = _how_link_ended(job, record)
    if state == "PENDING" and never_starts(job.reason):  # with a reason, a branch above set note
        note = "%s (%s: it never starts by itself)" % (note, never_starts(job.reason))
    running = state in LIVE_STATES and state != "PENDING"
    return {"job": job.job_id, "state": job.state, "elapsed": job.elapsed,
            "start": None if state == "PENDING" else job.start,  # not Slurm's estimate of it
            "nodes": job.nodes, "exit_code": job.exit_code,
            "end": job.end if is_final(job.state) else None, "role": role, "reason": job.reason,
            "link": role == "link", "note": note, "time_limit": job.time_limit if running else None,
            "time_left": max(job.time_limit - job.elapsed, 0)
            if running and job.time_limit is not None else None}


# What a link's end meant for the chain, by what its state means (state_meaning).
LINK_ENDS = {COMPLETE: "the work is done", INTERRUPTED: "not a failure: no retry counted",
             RESUME_ASKED: "not a failure: no retry counted",
             STOP_ASKED: "the work stopped the chain",
             NO_PROGRESS: "no progress (under a minute): counted as a retry",
             RETRY: "a failure, retried while retries are left", STOP: "the chain stopped"}


def _how_link_ended(job, record):
    """"exit 75: not a failure: no retry counted" (what the next link did is its own row)."""
    meaning = state_meaning(job.state, job.exit_code, job.elapsed)
    words = LINK_ENDS.get(meaning, "")
    if meaning == NO_PROGRESS and warned_before(record.warn, job.time_limit, job.elapsed):
        words = "after the --warn signal: no retry counted unless the link before it ended so too"
    if record.action == "fail" and job.job_id == record.predecessor:  # no retry was left
        words = "no progress (under a minute): " * (meaning == NO_PROGRESS) + \
            "the failure that exhausted the retries"
    code, _, signal_number = (job.exit_code or "").partition(":")
    if is_digits(signal_number, 3) and int(signal_number):  # killed: TIMEOUT's 0:15, ...
        try:
            return "%s: %s" % (signal.Signals(int(signal_number)).name, words)
        except ValueError:  # not a signal: Slurm's own code (OUT_OF_MEMORY's 0:125)
            return "ExitCode %s: %s" % (job.exit_code, words)
    if exit_status(job.exit_code) is None or base_state(job.state) not in ("COMPLETED", "FAILED"):
        return words
    return "exit %s: %s" % (code, words)


def no_retry_fixes(sbatch_error):
    """Whether sbatch refused the options themselves: a guard's sbatch of them fails the same."""
    return any(words in (sbatch_error or "") for words in REFUSED_OPTIONS)


def _nothing_continues(record, rows, chain):
    """Why nothing would continue the chain if its running link ended now, or None."""
    link = next((row for row in rows if row["job"] == record.job), None)
    if record.action not in WORK_ACTIONS or chain.cancelled or link is None or \
            base_state(link["state"]) not in LIVE_STATES - {"PENDING"}:
        return None
    if not record.successor and (no_retry_fixes(record.successor_error) or
                                 not record.guarded_by):  # else its guard queues it
        return "no successor is queued (%s)" % (
            record.successor_error or "its prologue has not queued one yet")
    successor = next((row for row in rows if row["job"] == record.successor), None)
    if successor is None or base_state(successor["state"]) in LIVE_STATES | {"UNKNOWN"}:
        return None  # it waits, or nobody can tell
    return "its successor %s ended %s" % (record.successor, _state_words(successor["state"]))


# status's verdicts by situation: (word, verdict, next, whether ``status --check`` fails), filled
# in from the chain's facts. A chain its last record ended has its cause's (STOP_CAUSES).
VERDICTS = {
    "unreadable": ("unknown", "cannot read the chain's state ({problem})",
                   "fix the named file as its problem says (if only its owner may read it, ask "
                   "them), then run status again", True),
    "no chain": ("unknown", "{problem}", "give the run directory a chain was submitted with", True),
    "copied": ("unknown", "{problem}", "resumable-chain status {home} shows that chain; "
               "resumable-chain submit {run_dir} --force [OPTIONS] -- SCRIPT starts one here",
               False),
    "cancelled": ("stopped", "cancelled with the cancel command ({cancelled})",
                  "{resume} continues it (the walltime so far is kept)", False),
    "cancelled unstarted": ("stopped", "cancelled with the cancel command ({cancelled})",
                            "{submit_again}", False),
    "running": ("running", "job {job} is {state}{left}", None, False),
    "running alone": ("running", "job {job} is {state}{left}; nothing would continue the chain "
                      "if it ended now: {alone}", "if it ends before its work is done, {resume} "
                      "continues the chain", True),
    "successor held": ("running", "job {job} is {state}{left}; its successor {successor} is held "
                       "(JobHeldUser): nothing continues the chain until it is released",
                       "scontrol release {successor} lets it start", False),
    "successor held by Slurm": ("running", "job {job} is {state}{left}; its successor {successor} "
                                "is held ({reason}: {why})", "find out why (scontrol show job "
                                "{successor}; sinfo -R), then scontrol release {successor} (an "
                                "admin's hold needs an admin)", True),
    "held": ("waiting", "job {job} is held (JobHeldUser)", "scontrol release {job} starts it",
             False),
    "held by Slurm": ("waiting", "job {job} is held ({reason}: {why})", "find out why (scontrol "
                      "show job {job}; sinfo -R), then scontrol release {job} (an admin's hold "
                      "needs an admin)", True),
    "never starts": ("waiting", "job {job} is pending ({reason}) and never starts by itself: "
                     "{why}", "fix its request (scontrol update JobId={job} ...), or "
                     "resumable-chain cancel {run_dir}, then {resume} with sbatch options that "
                     "fix it", True),
    "first job never starts": ("waiting", "job {job}, the chain's first job, is pending "
                               "({reason}) and never starts by itself: {why}", "fix its request "
                               "(scontrol update JobId={job} ...), or submit the chain again "
                               "with sbatch options that fix it (resumable-chain submit "
                               "{run_dir} --force OPTIONS -- SCRIPT cancels this one)", True),
    "pending": ("waiting", "job {job} is pending{because}", None, False),
    "no answer": ("unknown", "Slurm did not answer ({errors}); the state files say what is "
                  "shown", "try again when Slurm answers", False),
    "no job": ("unknown", "no job recorded yet", None, False),
    "first job died": ("broken", "job {job}, the chain's first job, ended {state} before its "
                       "prologue recorded it (its guard could not replace it; if it started, its "
                       "log says why)", "{submit_again}", True),
    "first job cancelled": ("stopped", "job {job}, the chain's first job, was {state} before it "
                            "ran (its guard leaves a person's cancel alone)", "{submit_again}",
                            False),
    "completed": ("finished", "job {job} COMPLETED", None, False),
    "forgotten": ("unknown", "Slurm no longer knows job {job}", None, False),
    "stopped by a person": ("stopped", "{reason}", "{resume} continues it", False),
    "successor cancelled": ("stopped", "job {job} ended {state} and its successor {successor} "
                            "was {successor_state} before it ran", "{resume} continues it", False),
    "successor died": ("broken", "job {job} ended {state} and its successor {successor} ended "
                       "{successor_raw}{on} before its prologue recorded it (it never started, or "
                       "its prologue refused: its log says which)",
                       "{resume} continues the chain", True),
    "sbatch failed": ("broken", "job {job} ended {state} and its successor could not be queued "
                      "({error})", "{resume} [sbatch options that fix it, e.g. -p PARTITION] "
                      "continues the chain", True),
    "job limit": ("broken", "job {job} ended {state} and your job limit refused its successor "
                  "({error})", "once a job of yours ends (squeue -u $USER), {resume} continues "
                  "the chain", True),
    "no successor": ("broken", "job {job} ended {state} and no successor was queued",
                     "{resume} continues the chain", True),
    "guarded": ("waiting", "{broken}; its guard {guard} ({guard_state}) continues the chain",
                None, False),
    "moved on": ("unknown", "a job of the chain recorded itself while status asked Slurm "
                 "(job {job} ended {state})", "run status again", False),
    "no journal": ("broken", "its links ran, but its journal {journal} is gone: resume cannot "
                   "continue it", "resumable-chain submit {run_dir} --force "
                   "[OPTIONS] -- SCRIPT starts a new chain there", True),
}
# status's verdict of a chain: text is "word: detail"; fails: whether status --check fails.
Verdict = collections.namedtuple("Verdict", "word text next fails")


def _verdict_of(situation, facts):
    word, detail, then, fails = VERDICTS[situation]
    text = "%s: %s" % (word, detail.format(**facts))
    return Verdict(word, text, then and then.format(**facts), fails)


def _verdict(record, rows, status, chain):
    facts = {"run_dir": shell_quote(status["run_dir"]),
             "resume": "resumable-chain resume %s" % shell_quote(status["run_dir"]),
             "submit_again": _submit_again(chain.submitted, status["run_dir"])}
    live = [row for row in rows if base_state(row["state"]) in LIVE_STATES]
    running = [row for row in live if base_state(row["state"]) != "PENDING"]
    if chain.problems and (record.job is None or not chain.jobs):  # not "no job recorded yet"
        return _verdict_of("unreadable", dict(facts, problem=chain.problems[0]))
    # the journal deleted (resume refuses), not just moved aside by a new first job (*.prev)
    if record.job is None and chain.jobs and not live and not _moved_on(chain):
        return _verdict_of("no journal", dict(facts, journal=JOURNAL_FILE))
    links = [row for row in rows if row["link"]]  # one that COMPLETED first finished the chain
    if status["cancelled"] and not live and not (links and links[-1]["state"] == "COMPLETED"):
        return _verdict_of("cancelled" if record.job is not None else "cancelled unstarted", dict(
            facts, cancelled=status["cancelled"]))
    if record.action in ("complete", "fail", "stop"):  # by its cause
        # sacct says who cancelled the predecessor (the controller, which the link asked, does not)
        predecessor = next((row for row in rows if row["job"] == record.predecessor), {})
        cause = record.cause if record.cause in STOP_CAUSES and (  # else a newer version's, or
            predecessor or record.cause != "cancelled") else None  # a cancel by someone unknown
        words = dict(record._asdict(), resume=facts["resume"], cancelled_by=_state_words(
            predecessor.get("state")), budget="resumable-chain budget " + shell_quote(
                record.budget_dir or "DIR"))
        word, text, then = STOP_CAUSES[cause]
        return Verdict(word, text.format(**words), then and then.format(**words), word == "failed")
    if running:
        row = running[-1]
        left = (" (%s of its time limit left)" % format_duration(row["time_left"])
                if row["time_left"] is not None else "")
        reason = next((job["reason"] for job in live if job["job"] == record.successor and
                       job is not row), None)  # a held successor waits for a person
        return _verdict_of(
            "successor held by Slurm" if reason in HELD_BY_SLURM else "successor held" if
            reason == "JobHeldUser" else "running alone" if status["would_not_continue"] else
            "running", dict(
            facts, job=row["job"], state=row["state"], left=left, successor=record.successor,
            reason=reason, why=HELD_BY_SLURM.get(reason), alone=status["would_not_continue"]))
    if live:  # a job that waits for a person says more than the newest
        stuck = [row for row in live if row["reason"] in HELD_BY_SLURM or never_starts(
            row["reason"])]
        row = (stuck or live)[-1]
        reason = row["reason"]
        return _verdict_of(
            "held" if reason == "JobHeldUser" else "held by Slurm" if reason in HELD_BY_SLURM
            else ("never starts" if record.job else "first job never starts") if stuck
            else "pending", dict(
                facts, job=row["job"], reason=reason, because=" (%s)" % reason if reason else "",
                why=HELD_BY_SLURM.get(reason) or never_starts(reason)))
    stopped = facts["stopped"] = [event for event in chain.events or () if event.event == "stopped"
                                  and event.job == record.job]  # a guard saw a person cancel it
    situation, facts = _idle(record, rows, links, status["slurm_errors"], facts)
    if situation in ("first job died", "successor died") and _moved_on(chain):
        return _verdict_of("moved on", facts)
    guard = None if no_retry_fixes(facts.get("error")) else status["guard"]  # it would fail too
    if VERDICTS[situation][0] == "broken" and guard and base_state(guard["state"]) in LIVE_STATES:
        return _verdict_of("guarded", dict(facts, guard=guard["job"], guard_state=guard["state"],
                                           broken=VERDICTS[situation][1].format(**facts)))
    if VERDICTS[situation][0] == "broken" and stopped:  # a person cancelled what resume queued
        return _verdict_of("stopped by a person", dict(facts, reason=stopped[-1].reason))
    return _verdict_of(situation, facts)


def _moved_on(chain):
    """Whether a link recorded itself after status read the files: Slurm, asked later, saw it
    end (a first job's prologue under a rate limit took 17 s), so its end says nothing."""
    again = read_chain(chain.store)
    return (again.jobs[-1:], again.record.job) != (chain.jobs[-1:], chain.record.job)


def _idle(record, rows, links, unanswered, facts):
    """(situation, facts) of a chain with nothing queued or running and no record ending it."""
    ended = next((row for row in rows if row["role"] == "first job"), None)
    if not (unanswered or links) and ended and is_final(ended["state"]):
        who, facts = "first job", dict(facts, job=ended["job"], state=_state_words(ended["state"]))
    elif unanswered or not links:  # what Slurm did not say cannot make a chain look ended
        return "no answer" if unanswered else "no job", dict(facts, errors="; ".join(unanswered))
    else:
        last, who = links[-1], "successor"
        facts = dict(facts, job=last["job"], state=_state_words(last["state"]))
        if base_state(last["state"]) == "COMPLETED":
            return "completed", facts
        if last["state"] == "UNKNOWN":
            return "forgotten", facts
        ended = next((row for row in rows if row["role"] == "successor"), None)
        if ended is None:  # sbatch refused it, or none was queued
            error = record.successor_error if record.job == last["job"] else None
            return ("no successor" if not error else "job limit" if JOB_LIMIT_REFUSAL in error
                    else "sbatch failed"), dict(facts, error=error)
        facts.update(successor=ended["job"], successor_raw=ended["state"],
                     successor_state=_state_words(ended["state"]),
                     on=" on %s" % ended["nodes"] if ended["nodes"] else "")
    cancelled = base_state(ended["state"]) == "CANCELLED" and (  # by a person, on purpose
        cancelled_by_person(ended["state"], ended["nodes"]) or facts["stopped"])
    return "%s %s" % (who, "cancelled" if cancelled else "died"), facts


def _submit_again(submitted, run_dir):
    if not submitted or not submitted.get("original"):
        return "submit a new chain (resumable-chain submit DIR ... SCRIPT)"
    words = ["resumable-chain", "submit", run_dir, "--force",
             "--max-retries", str(submitted.get("max_retries", DEFAULT_MAX_RETRIES))]
    if submitted.get("max_walltime"):
        words += ["--max-walltime", "%ds" % submitted["max_walltime"]]
    if submitted.get("python") and submitted["python"] != "python3":  # the compute nodes'
        words += ["--python", submitted["python"]]
    for name in ("budget_dir", "notify", "warn"):  # notify: a 0.5 record's (now NOTIFY_FILE)
        if submitted.get(name) and isinstance(submitted[name], str):
            words += ["--" + name.replace("_", "-"), submitted[name]]
    args = list(submitted.get("sbatch_args") or [])
    task = option_value(args, "--array")  # a sweep's task: submitted again as its sweep's
    if task:  # whose task's jobs are named <task>_<name>
        words[2], named = os.path.dirname(run_dir), "--job-name=%s_" % task
        args = ["--job-name=" + arg[len(named):] if arg.startswith(named) else arg for arg in args]
    words += args + ["--", submitted["original"]] + list(submitted.get("script_args") or [])
    cd = "cd %s && " % shell_quote(submitted["workdir"]) if submitted.get("workdir") else ""
    return "its first job never ran: " + cd + " ".join(shell_quote(word) for word in words)


def cancel_chain(run_dir, dry_run=False):
    """Mark a chain cancelled (a link that still starts stops), cancel its jobs until none is
    left; one that ended is left as it is (``ended`` says why)."""
    run_dir = check_path(run_dir, "run_dir")
    return _raised(cancel_chains([run_dir], dry_run)[run_dir])


def _raised(result):
    if isinstance(result, Exception):
        raise result
    return result


def cancel_chains(run_dirs, dry_run=False):
    """{run_dir: cancel_chain's result or error}, in a few Slurm commands for all (a chain at a
    time, 1,000 took 23 minutes)."""
    results, groups = {}, collections.OrderedDict()
    check_paths(run_dirs, "run_dirs")  # the results keep the caller's keys (a pathlib.Path)
    for run_dir in run_dirs:
        try:  # the path checked is the path used (no "x/.." detour)
            chain = chain_in(os.path.abspath(run_dir)).whole()
            check_owned_dir(chain.store.directory)  # a dry run or an ended chain: to its owner
            copy = copied_from(chain.store, chain.record, chain.submitted)
            if copy:
                raise StateError("%s; nothing cancelled (cancel that chain by its directory)"
                                 % Copied(run_dir, copy))
            groups.setdefault(chain.record.cluster, collections.OrderedDict())[run_dir] = chain
        except (StateError, ValueError) as error:
            results[run_dir] = error
    here = functools.lru_cache(maxsize=None)(current_cluster)  # asked once, if a chain names one
    for recorded, chains in groups.items():
        try:
            _cancel_group(chains, cluster_to_ask(recorded, here), dry_run, results)
        except (StateError, ValueError) as error:  # squeue failed: each chain says so
            results.update((run_dir, error) for run_dir in chains if run_dir not in results)
    return results


def _cancel_group(chains, ask, dry_run, results):
    """Left as they are: chains with nothing queued and an ending verdict (not scancelled ones,
    which the mark ends, nor broken ones: an earlier guard may still run)."""
    answer = _squeue_answer(_union(chain.candidates() for chain in chains.values()), ask[0])
    idle = [path for path, chain in chains.items() if not any(_queued_of(chain.candidates(),
                                                                         *answer))]
    for run_dir, status in zip(idle, chains_status([chains[one].store.directory for one in idle])):
        chain, word = chains[run_dir], status["verdict_word"]
        scancelled = word == "stopped" and not chain.cancelled and \
            chain.record.action in WORK_ACTIONS
        if word in ("finished", "stopped", "failed") and not scancelled:
            results[run_dir] = dict(cancelled=[], leftover=[], dry_run=dry_run, errors=[], log=[],
                                    ended="already %s (%s): nothing to cancel" % (
                                        word, status["verdict"].partition(": ")[2]))
    marked, commands = {}, {}
    for run_dir in [run_dir for run_dir in chains if run_dir not in results]:
        store = chains[run_dir].store
        try:
            if dry_run:  # it reads as the cancel it previews: a file others could write is refused
                store, store.acting = chain_store(store.directory), True
                marked[run_dir] = chain_in(store.directory, store).whole()
                continue
            with store.locked():  # marked first: a link that starts meanwhile stops
                marked[run_dir] = chain = _write_mark(store)
                command = chain.record.notify
                commands[run_dir] = store.read_notify() if command is True else command
        except (StateError, ValueError) as error:
            results[run_dir] = error
    for run_dir, result in _cancel_jobs({run_dir: chain.to_cancel() for run_dir, chain in
                                         marked.items()}, *ask, dry_run=dry_run).items():
        chain = chains[run_dir]
        last = (chain.jobs or [chain.record.successor])[-1]  # or the first job
        results[run_dir] = dict(result, log=announce(chain.store, Event(
            "stopped", last, len(chain.jobs), "cancelled with the cancel command (jobs "
            "%s)" % " ".join(result["cancelled"]), int(time.time())), commands[run_dir])
            if result["cancelled"] else [])


def _write_mark(store):
    chain = chain_in(store.directory, store).whole()
    store.write_text(CANCEL_FILE, time.strftime("%Y-%m-%dT%H:%M:%S") + "\n")
    return chain


def _union(job_lists):
    return sorted(set(itertools.chain.from_iterable(job_lists)), key=int)


def _squeue_answer(links, cluster):
    """({predecessor: [this user's pending dependents]}, {job ID: base state}) of the links."""
    dependents = Slurm(cluster).dependents()
    live = Slurm(cluster).jobs(_union([links] + list(dependents.values())))
    return dependents, {job.job_id: base_state(job.state) for job in live}


def _queued_of(links, dependents, live):
    """(pending, running) job IDs of the links and their successors, however deep."""
    pending, frontier = set(), list(links)
    while frontier:  # successors of successors, queued while we looked
        for successor in dependents.get(frontier.pop(), ()):
            if successor not in pending:
                pending.add(successor)
                frontier.append(successor)
    shown = set(links) | pending
    pending |= set(job for job in shown if live.get(job) == "PENDING")
    return pending, set(job for job in shown if job in live) - pending


def _cancel_jobs(links, cluster, note, dry_run=False):
    """{key: result} of the chains whose jobs are {key: links}, one squeue a round for all:
    pending successors first (a cancelled link releases them), then running links."""
    cancelled, errors = {key: [] for key in links}, {key: [] for key in links}
    for _round in range(CANCEL_ROUNDS):
        answer = _squeue_answer(_union(links.values()), cluster)
        queued = {key: _queued_of(jobs, *answer) for key, jobs in links.items()}
        leftover = {key: _union(sets) for key, sets in queued.items()}
        if not any(leftover.values()) or dry_run:
            break
        for index in (0, 1):
            groups = {key: sorted(sets[index], key=int) for key, sets in queued.items()}
            said = Slurm(cluster).cancel(_union(groups.values()))
            for key, group in groups.items():
                lines = "; ".join(sorted(set(said[job] for job in group if job in said)))
                errors[key] += ["scancel %s: %s" % (" ".join(group), lines)] * bool(lines)
                cancelled[key] += [job for job in group if job not in cancelled[key]]
        links = {key: _union([jobs, leftover[key]]) for key, jobs in links.items()}
        time.sleep(1)
    else:
        live = set(job.job_id for job in Slurm(cluster).jobs(_union(links.values())))
        leftover = {key: [job for job in jobs if job in live] for key, jobs in links.items()}
    return {key: dict(cancelled=[job for job in cancelled[key] if job not in leftover[key]],
                      leftover=leftover[key], dry_run=dry_run,
                      errors=errors[key] + [note] * bool(note and (errors[key] or leftover[key])))
            for key in links}


@contextlib.contextmanager
def interrupts_held():
    """Ctrl-C held back through the block (a queued job's guard, record and release: all of it,
    or a failure cancels it); yields a list that holds a True if one came."""
    came, previous = [], signal.getsignal(signal.SIGINT)
    with contextlib.suppress(ValueError):  # not the main thread, which alone gets signals
        if previous is not signal.SIG_IGN:  # nohup, a shell's background job: none comes
            signal.signal(signal.SIGINT, lambda *_: came.append(True))
    try:
        yield came
    finally:
        with contextlib.suppress(ValueError):  # None: not set from Python
            signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
    if came and callable(previous) and previous is not signal.default_int_handler:
        previous(signal.SIGINT, None)  # a driver's handler hears it, once all is done


def cancel_if_unfinished(job_id, install, cluster=None, guard=None):
    """``install()`` for a job queued held, or cancel it and its ``guard``: nothing half-made."""
    try:
        return install()
    except (StateError, OSError, KeyboardInterrupt) as error:
        why = getattr(error, "strerror", None) or str(error) or "interrupted"
        failed = Slurm(cluster).cancel([job_id] + ([guard] if guard else []))
        if failed:  # left held, named by no chain: said, never "cancelled"
            jobs = " ".join(sorted(failed, key=int))
            raise StateError("%s; job%s %s could not be cancelled (%s): scancel %s%s" % (
                why, "s" * (len(failed) > 1), jobs, "; ".join(sorted(set(failed.values()))),
                "-M %s " % cluster if cluster else "", jobs))
        raise StateError("%s; the new job %s%s was cancelled, nothing else changed" % (
            why, job_id, " (and its guard %s)" % guard if guard else ""))


def module_warning():
    """A warning when someone else could replace this module, which every link and guard of a
    chain runs as you (a tools directory others may write in), or None: StrictModes' rules."""
    path, trusted = module_path(), (0, os.geteuid())
    with contextlib.suppress(OSError):
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return None  # CVMFS, a container's image: a publisher's uid, but no one may write it
        for entry, info, holds in [(path, os.stat(path), False)] + list(path_walk(path)):
            if info.st_uid not in trusted or (entry == path or holds and not (
                    info.st_mode & stat.S_ISVTX)) and foreign_write(info, entry):
                return ("WARNING: others could replace the module %s (%s is %s's, mode %04o), "
                        "which every link and guard runs as you: keep a copy in a directory "
                        "only you (and root) can write" % (path, entry, uid_name(info.st_uid),
                                                            stat.S_IMODE(info.st_mode)))
    return None


def read_batch_script(script):
    try:  # a device or FIFO (/dev/zero) would be read forever: sbatch takes regular files only
        if not stat.S_ISREG(os.stat(script).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        with open(script, "rb") as handle:
            data = handle.read(MAX_SCRIPT_BYTES + 1)
        if len(data) > MAX_SCRIPT_BYTES:
            raise OSError(errno.EFBIG, "over 4 MiB, Slurm's default max_script_size")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise StateError("cannot read batch script %s: %s" % (script, getattr(
            error, "strerror", None) or error))
    if "\r\n" in text:  # sbatch refuses it, in two lines of which a one-line error keeps one
        raise StateError("%s has DOS line breaks (\\r\\n), which sbatch refuses: run dos2unix %s"
                         % (script, shell_quote(script)))
    try:
        header, body = split_batch_script(text)
    except ValueError as error:
        raise StateError("%s is %s" % (script, error))
    words = header.split("\n", 1)[0][2:].split() or ["(nothing)"]  # env's: -S bash -l, A=1 bash
    if os.path.basename(words[0]) == "env":  # its program: the first shell, or the first word
        words = sorted(words[1:] or ["(nothing)"], key=lambda word: (  # that is no option
            os.path.basename(word).rstrip("0123456789.") not in SHELLS, word[:1] == "-"))
    if os.path.basename(words[0]).rstrip("0123456789.") not in SHELLS:  # ksh93, bash5
        raise StateError("%s runs %s (its #! line), not a shell: the prologue submit puts in it "
                         "is shell code; submit a #!/bin/bash script that runs it" % (
                             script, words[0]))
    for name in sorted(option_names(script_directives(header)).intersection(IN_NO_SCRIPT)):
        raise StateError("%s has an #SBATCH %s line: %s; remove it" % (
            script, name, REFUSED_SBATCH_OPTIONS[name]))
    return header, body


def submit_chain(run_dir, script, script_args, sbatch_args, *, max_retries=DEFAULT_MAX_RETRIES,
                 max_walltime=None, force=False, python="python3", budget_dir=None,
                 notify=None, warn=None, task=None, before_queueing=None, slurm=None):
    """Make SCRIPT resumable in run_dir and submit its first job held until all is written, or
    nothing; ``task``: a sweep's; ``before_queueing()`` runs right before sbatch."""
    if not is_words(script_args):  # as the submit record's, read back
        raise ValueError("script_args must be a list of at most %d words, got %.60r" % (
            MAX_WORDS, script_args))
    header, body = read_batch_script(check_path(script, "script"))
    if PROLOGUE_TEMPLATE.split("{", 1)[0] in header + body:  # right after #SBATCH lines too
        raise StateError("%s already holds a pasted resumable_chain prologue: submit adds its "
                         "own; remove the pasted one (or sbatch the script as it is)" % script)
    sbatch_args = check_sbatch_args(sbatch_args, allowed=("--hold",))
    check_sbatch_environment()
    hold = "--hold" in option_names(sbatch_args)  # the first job only, as --begin
    begin = ["--begin=" + value for value in option_values(sbatch_args, "--begin")[-1:]]
    max_retries, max_walltime = check_max_retries(max_retries), check_max_walltime(max_walltime)
    notify, warn = check_notify(notify), check_warn(warn)
    check_warn_fits(warn, script_directives(header) + sbatch_args, max_walltime)
    run_dir = os.path.abspath(check_path(run_dir, "DIR"))
    python = os.path.abspath(python) if os.sep in check_path(python, "python") else python
    _check_run_dir(run_dir, force)  # again under the lock as the chain is installed
    sbatch_args = _chain_defaults(run_dir, script, header, without_options(sbatch_args,
                                                                           ("--hold", "--begin")))
    copy_path = os.path.join(run_dir, "resumable-" + os.path.basename(script))
    one_task = [] if task is None else ["--array=%d" % task]  # the prologue adds it to links
    created, store, slurm = make_run_dir(run_dir), chain_store(run_dir), slurm or Slurm()
    staged = "%s.%s" % (STAGED_SCRIPT, os.urandom(6).hex())  # each submit its own: two may run
    try:  # stage the script (notify: in NOTIFY_FILE, owner only) and submit it, or undo that
        store.write_text(staged, header + render_prologue(
            run_dir, max_retries=max_retries, max_walltime=max_walltime, script=copy_path,
            sbatch_args=sbatch_args, python=python, budget_dir=budget_dir, warn=warn)
            + (finished_trap(python, run_dir) if notify else "") + body, mode=0o700)
        if before_queueing:
            before_queueing()
        first_job, named = slurm.submit_held(["--hold", "--no-requeue"] + one_task + sbatch_args
                                             + begin, store.path(staged), script_args)
    except (StateError, ValueError, KeyboardInterrupt):
        with contextlib.suppress(OSError):  # undone as far as it goes: the error says why
            store.remove(staged)
            for directory in reversed(created):
                os.rmdir(directory)
        raise
    with interrupts_held() as interrupted:  # queued: all of it, or (a failure) none
        submitted = {"first_job": first_job, "cluster": named or slurm.name(), "script":
                     copy_path, "original": os.path.abspath(script), "sbatch_args": sbatch_args
                     + one_task, "script_args": list(script_args), "max_retries": max_retries,
                     "max_walltime": max_walltime, "workdir": os.getcwd(), "budget_dir":
                     budget_dir and os.path.abspath(budget_dir), "notify": notify, "warn": warn,
                     "python": python, "time": int(time.time())}
        submitted["guard"], guard_error = (None, "sbatch named cluster %s" % named) if named \
            else queue_guard(first_job, run_dir, option_value(script_directives(
                header) + sbatch_args, "--job-name"), os.environ, python=python)
        cancelled, previous = cancel_if_unfinished(first_job, lambda: _install_chain(
            run_dir, force, staged, copy_path, submitted), named, submitted["guard"])
        if not hold:
            Slurm(named).release(first_job)
    return {"job": first_job, "script": copy_path, "cancelled": cancelled, "held": hold,
            "guard": submitted["guard"], "guard_error": guard_error, "previous": previous,
            "interrupted": bool(interrupted)}


def _check_run_dir(run_dir, force):
    """The live jobs of run_dir's chain (refused unless ``force``); refused in or over a chain."""
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise StateError("run directory %s exists and is not a directory" % run_dir)
    check_chain_place(run_dir)
    old = read_chain(chain_store(run_dir)).whole()  # then _chain_defaults: nothing planted
    live = [] if copied_from(old.store, old.record, old.submitted) else Slurm(  # another's jobs
        cluster_to_ask(old.record.cluster)[0]).jobs(old.candidates())
    if not force:
        refuse_live(run_dir, live, "cancel it first (resumable-chain cancel %s) or pass --force "
                    "to cancel the live chain and start anew" % shell_quote(run_dir))
    return live


def _chain_defaults(run_dir, script, header, sbatch_args):
    """sbatch_args with the chain's defaults; a missing log directory: every link FAILED 0:53."""
    import re
    given = option_names(script_directives(header) + sbatch_args)
    # --chdir: the links work in the run directory, not where submit ran; --job-name: sbatch
    # would name it after our copy, squeue shows 8 characters: the chain's name tells them apart
    defaults = (("--job-name", os.path.basename(run_dir) or os.path.basename(script)),
                ("--chdir", run_dir), ("--output", output_pattern(run_dir, "slurm-%j.out")))
    sbatch_args = [name + "=" + value for name, value in defaults
                   if name not in given] + sbatch_args
    options = script_directives(header) + sbatch_args
    logs = [(name, option_value(options, name)) for name in ("--output", "--error")]
    for name, path in logs:
        folder = os.path.normpath(os.path.dirname(os.path.join(os.path.abspath(option_value(
            options, "--chdir")), path or "")))
        if path and "%" not in folder and folder != run_dir and not os.path.isdir(folder):
            raise StateError("%s=%s: its directory %s does not exist, and Slurm would fail every "
                             "link at its launch; create it first (mkdir -p %s)"
                             % (name, path, folder, shell_quote(folder)))
    if "--open-mode" not in option_names(options) and any(  # one log for every link: each
            path and not re.search("%[0-9]*[jJA]", path.replace("%%", ""))  # would empty it
            for _, path in logs):
        sbatch_args = ["--open-mode=append"] + sbatch_args
    check_nothing_planted(run_dir, options)  # after the state files, each refused by its name
    return sbatch_args


def _install_chain(run_dir, force, staged, copy_path, submitted):
    """Under the lock: the staged script becomes the chain's copy, the old chain's files ``*.prev``,
    the submit record written; a live chain (another submit's since the first check) refused, or
    with ``force`` its jobs cancelled first: (the jobs cancelled, the files kept)."""
    store, cancelled = chain_store(run_dir), []
    try:
        with store.locked():
            if _check_run_dir(run_dir, force):
                chain = _write_mark(store)
                result = _cancel_jobs({0: chain.to_cancel()}, *cluster_to_ask(
                    chain.record.cluster))[0]
                if result["leftover"]:
                    raise StateError("--force: could not cancel the live chain (still there: %s; "
                                     "it is marked cancelled, so its links stop when they start)"
                                     % " ".join(result["leftover"]))
                cancelled = result["cancelled"]
            os.replace(store.path(staged), copy_path)
            previous = store.keep_previous()
            store.write_public(SUBMIT_FILE, submitted)
    except (StateError, OSError, KeyboardInterrupt):
        with contextlib.suppress(OSError):  # its job is cancelled: the script goes too
            store.remove(staged)
        raise
    return cancelled, previous


def resume_chain(run_dir, max_walltime=None, max_retries=None, *, now=time.time,
                 sbatch_args=None, notify=None, warn=None):
    """Queue a link continuing an ended chain (history and walltime kept; options given replace
    the recorded ones from it on)."""
    run_dir = os.path.abspath(check_path(run_dir, "run_dir"))
    given = check_sbatch_args(sbatch_args or ())
    check_sbatch_environment()
    options = {"max_retries": None if max_retries is None else check_max_retries(max_retries),
               "max_walltime": check_max_walltime(max_walltime),
               "notify": check_notify(notify), "warn": check_warn(warn)}
    if not holds_chain(run_dir):  # said before any lock file is made in it
        raise not_a_chain(run_dir) if os.path.isdir(run_dir) else no_directory(run_dir)
    store = chain_store(run_dir)
    with store.locked():
        chain = chain_in(run_dir, store).whole()  # a corrupt file raises: fix it first
        snapshot = store.rolled_forward(Snapshot(chain.walltime, chain.retries, (
            chain.jobs or [None])[-1], chain.record.job and chain.record, chain.cancelled))
        target, note = cluster_to_ask(chain.record.cluster)
        try:
            counted, state = _last_link(chain, snapshot, target)
        except StateError as error:
            raise StateError("%s (%s)" % (error, note)) if note else error
        next_link = _recorded_next_link(chain, given)
        record = _resumed_record(snapshot, chain.record, counted, state, options)._replace(
            cluster=chain.record.cluster, next=next_link._asdict())
        left = record.budget_dir and budget_report(record.budget_dir)["left"]
        if record.budget_dir and left < MIN_TIME_LIMIT:  # its link would stop at once
            raise StateError("the shared budget in %s has %d s left: raise its cap first "
                             "(resumable-chain budget %s --max-walltime T)" % (
                                 record.budget_dir, left, shell_quote(record.budget_dir)))
        header = ""  # unreadable: sbatch says why; else its #SBATCH --time limits the links too
        with contextlib.suppress(StateError):
            header = read_batch_script(next_link.script)[0]
        check_warn_fits(record.warn, script_directives(header) + list(next_link.sbatch_args),
                        record.max_walltime)
        check_nothing_planted(run_dir, script_directives(header) + list(next_link.sbatch_args))
        job, _ = Slurm(target).submit_held(successor_options(
            next_link, "--hold", "--no-requeue"), next_link.script, next_link.script_args,
            cwd=next_link.workdir, named=True)
        with interrupts_held() as interrupted:  # queued: all of it, or (a failure) none
            guard, guard_error = (None, "not on this cluster") if target else queue_guard(job,
                run_dir, next_link.job_name, os.environ, python=chain.submitted.get("python"))
            record = record._replace(job=job, guarded_by=guard, time=int(now()))

            def install():  # not the chain file: it names the held job once it runs (_run_again)
                store.apply(snapshot._replace(last_job=job), record)
                store.remove(CANCEL_FILE)
                store.write_record(record)
            cancel_if_unfinished(job, install, target, guard)
            Slurm(target).release(job)
    with interrupts_held() as late:  # its event journaled (and notified) whole too
        log = announce(store, Event("resumed", job, record.link, record.reason, record.time),
                       record.notify)
    log = ["WARNING: could not queue a guard for job %s (%s): if it dies before its prologue, "
           "resume again" % (job, guard_error)] * bool(guard_error) + log + [
               "Ctrl-C came once job %s was queued: the chain was resumed whole" % job] * bool(
                   interrupted or late)
    return {"job": job, "walltime": record.walltime, "counted": counted, "log": log,
            "script": next_link.script, "interrupted": bool(interrupted or late)}


def _resumed_record(snapshot, previous, counted, state, options):
    """A resumed link's record but job, cluster and next link; an option None: as recorded."""
    ended = ("the chain %s (job %s)" % (EVENT_OF_ACTION[previous.action], previous.job)
             if previous.action in EVENT_OF_ACTION else "job %s ended" % previous.job
             + (" " + _state_words(state) if state else ""))
    walltime = (snapshot.walltime or 0) + counted
    kept = dict((name, getattr(previous, name) if value is None else value)
                for name, value in options.items())
    cap = kept["max_walltime"]
    if cap is not None and cap - walltime < MIN_TIME_LIMIT:
        raise StateError("the chain used %s of its max_walltime %s: pass --max-walltime with "
                         "a larger cap (at least %s)" % (
                             format_duration(walltime), format_duration(cap),
                             format_duration(walltime + MIN_TIME_LIMIT)))
    return Record(predecessor=previous.job, predecessor_state=state,
                  predecessor_elapsed=counted, source="resume", action="resume",
                  reason="resumed with the resume command after " + ended,
                  walltime=walltime, retries=0, settings_from="resume", successor=None,
                  budget_dir=previous.budget_dir, phase="queued",
                  link=link_number(chain_length(snapshot), "resume"), **kept)


def _last_link(chain, snapshot, cluster):
    """(seconds, state) of the journal's last link, or (0, None) if a successor counted it."""
    previous, directory = chain.record, chain.store.directory
    copy = copied_from(chain.store, previous, chain.submitted)
    if copy:  # its files name that chain's live jobs: "cancel it first" would be refused
        raise StateError("%s; nothing resumed (resume that chain by its directory)" % Copied(
            directory, copy))
    refuse_live(directory, Slurm(cluster).jobs(chain.candidates()), "nothing to resume; "
                "wait for it or run resumable-chain cancel %s first" % shell_quote(directory))
    if previous.job is None:  # no link ran: as status says
        raise StateError("%s has no journal (%s): use submit to start a new chain" % (
            directory, JOURNAL_FILE) if chain.jobs else "nothing to resume in %s: %s" % (
                directory, _submit_again(chain.submitted, directory)))
    found = observe_predecessor(previous.job, window=0, slurm=Slurm(cluster)).job if (
        previous.action in WORK_ACTIONS and previous.job == snapshot.last_job) else None
    if found and found.state == NOT_VISIBLE:
        raise StateError("cannot find job %s's final state in accounting yet; try again "
                         "in a minute" % previous.job)
    if previous.action == "complete" or found and base_state(found.state) == "COMPLETED":
        raise StateError("the chain in %s finished (job %s %s): nothing to resume; %s starts a "
                         "new run" % (directory, previous.job, "COMPLETED" if found else
                                      "found its predecessor COMPLETED", "submit" if chain.submitted
                                      else "a new job of its script (sbatch)"))
    return (found.elapsed, found.state) if found else (0, None)


def _recorded_next_link(chain, given):
    """The recorded next link with ``given``; StateError if its script is gone or another chain's,
    or submit's script was edited (not the same text rewritten) after the copy the links run."""
    store, spec = chain.store, chain.record.next or {}
    if not spec.get("script"):
        raise StateError("the chain did not record how to queue its next link; use submit to "
                         "start a new chain")
    spec = NextLink(runnable_script(store, spec["script"]), without_options(list(spec.get(
        "sbatch_args") or ()), option_names(given)) + given, list(spec.get("script_args") or ()),
        option_value(given, "--job-name") or spec.get("job_name"),  # its guards' name follows
        spec.get("workdir"))
    moved = "was the run directory moved or copied? Its links run where it was made: submit a " \
        "new chain here"
    if not os.path.isfile(spec.script):
        raise StateError("the chain's job script %s is gone and no copy was saved (%s); "
                         "cannot resume (%s)" % (spec.script, store.path(SCRIPT_COPY), moved))
    named = (prologue_run_dir(spec.script) or "").replace("%a", option_value(  # a sweep's task
        spec.sbatch_args, "--array") or "%a")
    if named and not (os.path.isdir(named) and os.path.samefile(named, store.directory)):
        raise StateError("the chain's job script %s keeps its state in %s, not in %s: %s"
                         % (spec.script, named, store.directory, moved))
    original, copy = chain.submitted.get("original"), chain.submitted.get("script")
    try:
        if copy != spec.script or os.stat(original).st_mtime <= os.stat(copy).st_mtime:
            return spec
        header, body = read_batch_script(original)
        with open(copy, "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape")
    except (OSError, TypeError, ValueError, StateError):
        return spec
    if not (text.startswith(header) and text.endswith(body)):
        raise StateError("%s was edited after submit, but the links run submit's copy %s: make "
                         "the same change there (below its prologue), or run touch -r %s %s to "
                         "resume the copy as it is, or submit the edited script again with "
                         "--force (a new chain: its work resumes from its checkpoint, retries "
                         "and walltime count anew)" % (original, copy, shell_quote(original),
                                                       shell_quote(copy)))
    return spec


DURATION_HELP = "a Slurm duration such as 48:00:00 (a bare number is minutes) or seconds as 5400s"
RETRIES_HELP = "failures (not timeouts) retried before the chain fails"
CHAINS_OWN = " (default: the chain's own)"
# Every option, once: (its value's check, the same for the user's commands, render_prologue,
# submit, resume and the in-job steps; its help). "COMMAND --option": that command's help only.
OPTIONS = {
    "--max-retries": (retries_from_text, RETRIES_HELP + " (default %d)" % DEFAULT_MAX_RETRIES),
    "--max-walltime": (check_max_walltime, "cap on the chain's accumulated walltime: "
                       + DURATION_HELP + "; at least one minute (default: none)"),
    "--script": (str, "script the successor is submitted with (default: the job's own)"),
    "--force": (bool, "if DIR holds a live chain, cancel it (printing its job IDs) and start a "
                "new one; its files are kept as *.prev"),
    "--python": (str, "interpreter on the compute nodes (default python3; submit makes a path "
                 "absolute)"),
    "--budget-dir": (str, "draw every link's time from the shared walltime budget in B (created "
                     "with: resumable-chain budget B --max-walltime T)"),
    "--notify": (check_notify, "run CMD with /bin/sh -c once per chain event (%s), with "
                 "RESUMABLE_CHAIN_EVENT, _DIR, _JOB, _LINK, _REASON set; at most %d s"
                 % (", ".join(EVENTS), NOTIFY_TIMEOUT)),
    "--warn": (check_warn, "send SIG to the work S seconds before each link ends, whatever ends "
               "it (its time limit, a limit lowered for --max-walltime or a budget), e.g. "
               "USR1@120; the work also finds the end in RESUMABLE_CHAIN_END"),
    "--json": (bool, "print one JSON object (a list for several chains)"),
    "--check": (bool, "exit 1 when a chain needs a person (failed, broken, would not continue)"),
    "--dry-run": (bool, "only print what would be done"),
    "--lookup": (str, "the pipe the prologue's lookup of the predecessor answers on"),
    "resume --max-retries": (None, RETRIES_HELP + CHAINS_OWN),
    "resume --max-walltime": (None, "a new cap on the accumulated walltime" + CHAINS_OWN),
    "resume --notify": (None, "a new notify command for this link and every later one"
                        + CHAINS_OWN),
    "resume --warn": (None, "a new warning for this link and every later one" + CHAINS_OWN),
    "budget --max-walltime": (None, "create the budget with this cap, or change its cap: "
                              + DURATION_HELP),
    "budget --json": (None, "print one JSON object"),
}


# ---------------------------------------------------------------------------
# 15. Command line: the user's commands (argparse reads them); all printing is here
# ---------------------------------------------------------------------------

def split_submit_argv(argv):
    """``submit``'s words apart: (DIR and our options, (sbatch options, SCRIPT, its arguments))."""
    dashes = argv.index("--") if "--" in argv else len(argv)
    ours, sbatch_args, index = _split_options("submit", argv[:dashes])
    words = argv[dashes + 1:] if dashes < len(argv) else argv[index:]
    if not ours or ours[0].startswith("-") or (index < dashes < len(argv)):
        raise ValueError("submit: give DIR first, then the options (see submit --help)")
    if not words:  # --wrap CMD is refused as such (not as a missing SCRIPT)
        chain_sbatch_args(sbatch_args)
        raise ValueError("submit: give SCRIPT after --" if dashes < len(argv) else
                         "submit: no SCRIPT: give DIR, the options, then SCRIPT (see --help)")
    after = words[1:] if dashes == len(argv) else []  # SCRIPT's words that may be misplaced
    misplaced = [word for word in after
                 if word.split("=", 1)[0] in usage_options(USER_COMMANDS["submit"].usage)]
    if misplaced:
        raise ValueError("submit: %s comes after the script %s, so it would go to the script: put "
                         "it before SCRIPT, or write -- SCRIPT ARGS to pass it to the script"
                         % (misplaced[0], words[0]))
    # after SCRIPT, sbatch's short options that a script rarely takes are warned about too
    looks = [word for word in after if word[:2] in ("-p", "-t", "-J", "-N", "-A", "-q", "-G") or (
        word.split("=", 1)[0] in SBATCH_VALUE_OPTIONS | SBATCH_OTHER_OPTIONS and word[1] == "-")]
    return ours, (sbatch_args, words[0], words[1:], looks)


def split_resume_argv(argv):
    ours, sbatch_args, _ = _split_options("resume", argv)  # DIR... : it reads every word
    return ours, (sbatch_args,)  # no DIR: argparse says it is required


def _split_options(command, words):
    """(DIRs and our options, sbatch options, the index of the first word after the DIRs that
    is neither); options read as sbatch reads them, ours spelled out."""
    options = usage_options(USER_COMMANDS[command].usage)
    values = SBATCH_VALUE_OPTIONS | {name for name in options if options[name]}
    flags = SBATCH_OTHER_OPTIONS | {name for name in options if not options[name]}
    ours, sbatch_args, index, run_dirs = [], [], 0, []
    while index < len(words):
        if not words[index].startswith("-"):  # DIR (options may come before it), then SCRIPT
            if run_dirs and "DIR..." not in USER_COMMANDS[command].usage:
                break
            run_dirs, index = run_dirs + [words[index]], index + 1
            continue
        name, spelled, takes_value = resolve_option(words[index], values, flags)
        if name in options:
            ours += [spelled] + words[index + 1:index + 1 + takes_value]
        else:
            sbatch_args += words[index:index + 1 + takes_value]
        index += 1 + takes_value
    return run_dirs + ours, sbatch_args, index


def _build_parser():
    """An option not given is left out (argparse.SUPPRESS): its function has its default."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):  # main() stays the only place that exits
            command = self.prog[len(COMMAND):].strip()  # main() names the program itself
            raise StateError("%s%s (see --help)" % (command and command + ": ", message))

    def checked(check):  # our validators' messages, as argparse shows a bad value
        def convert(text):
            try:
                return check(text)
            except ValueError as error:
                raise argparse.ArgumentTypeError(str(error))
        return convert

    formatter = argparse.RawDescriptionHelpFormatter
    parser = Parser(prog=COMMAND, formatter_class=formatter,
                    description=(__doc__ or "").split("\nContents:")[0])  # not the file's sections
    parser.add_argument("--version", action="version", version="resumable-chain " + __version__)
    commands = parser.add_subparsers(metavar="COMMAND")
    for name, command in USER_COMMANDS.items():
        sub = commands.add_parser(name, formatter_class=formatter, help=command.help,
                                  description=command.description,
                                  usage="%s %s %s" % (COMMAND, name, command.usage),
                                  epilog="example:\n  " + as_run(command.example))
        sub.add_argument("run_dir", metavar="DIR", help=command.dirs,
                         nargs="+" if "DIR..." in command.usage else None)
        for option, metavar in usage_options(command.usage).items():
            kind = dict(metavar=metavar, type=checked(OPTIONS[option][0])) if metavar else dict(
                action="store_true")
            sub.add_argument(option, default=argparse.SUPPRESS, help=as_run(OPTIONS.get(
                "%s %s" % (name, option), OPTIONS[option])[1]), **kind)
    return parser


def format_status(status):
    lines = ["chain in %s: %d link(s) ran" % (status["run_dir"], status["links"])]
    lines += _status_warnings(status, "")
    rows = [("JOBID", "ROLE", "STATE", "ELAPSED", "START", "END", "NOTE")]
    for row in status["jobs"]:
        state = _state_words(row["state"])  # who cancelled it, by name
        note = "" if row["note"] == state else row["note"] or ""
        if row["time_left"] is not None:
            note = "time limit %s, %s left" % (format_duration(row["time_limit"]),
                                               format_duration(row["time_left"]))
        rows.append((row["job"], row["role"], state, format_duration(row["elapsed"]),
                     row["start"] or "-", row["end"] or "-", note))
    width = max(len(row[2]) for row in rows + [("", "", " " * 26)])  # CANCELLED by a long name
    lines += [("%-12s %-14s %-*s %10s  %-19s  %-19s  %s" % (row[:2] + (width,) + row[2:])).rstrip()
              for row in rows]
    cap = status["max_walltime"]
    walltime = "walltime: %s" % _counted(status["walltime_used"], format_duration)
    if status["walltime_uncounted"]:
        walltime += " (%s counted + %s of the last link)" % (
            _counted(status["walltime"], format_duration),
            format_duration(status["walltime_uncounted"]))
    walltime += " of %s" % (format_duration(cap) if cap else "unlimited")
    lines.append(walltime + (", %s left" % _counted(status["walltime_left"], format_duration)
                             if cap else ""))
    allowed, retries = status["max_retries"], status["retries"]
    lines.append("retries: %s" % _counted(retries, str) + (
        "" if allowed is None else " (at most %d allowed%s)" % (
            allowed, ", exceeded" if (retries or 0) > allowed else "")))
    budget = status["budget"]
    if budget:
        lines.append("shared budget %s: %s used, %s reserved, %s left of %s" % (
            budget["dir"], format_duration(budget["used"]), format_duration(budget["reserved"]),
            format_duration(budget["left"]), format_duration(budget["cap"])))
    lines.append("pending successor: %s" % (status["pending_successor"] or (
        "unknown (Slurm did not answer)" if any(row["role"] == "successor" and row["state"] ==
                                                "UNKNOWN" for row in status["jobs"]) else "none")))
    lines += _guard_line(status)
    if status["lock"]["kind"] == "file":  # the kernel's lock, the common case, goes unsaid
        lines.append("lock: file (%s)" % status["lock"]["why"])
    lines += ["event: %s %s (job %s): %s" % (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(event["time"] or 0)), event["event"],
        event["job"], event["reason"]) for event in status["events"]]
    lines.append("verdict: %s" % status["verdict"])
    lines += ["next: %s" % status["next"]] if status["next"] else []
    return "\n".join(lines) + "\n"


def _guard_line(status):
    guard = status["guard"]
    if status["verdict_word"] not in ("running", "waiting") or not (guard or status["guard_error"]):
        return []
    if not guard:
        return ["guard: none: %s (Slurm's requeue only)" % status["guard_error"]]
    if is_final(guard["state"]):
        return ["guard: job %s %s (%s): %s" % (  # ran: its log says what it did
            guard["job"], "ran" if guard.get("ran") else "ended", _state_words(guard["state"]),
            guard.get("ran") or ("see %s" % GUARD_LOG if guard["nodes"] else "it never started"))]
    note = next((row["note"] for row in status["jobs"] if row["job"] == guard["job"]), None)
    return ["guard: job %s %s" % (guard["job"], guard["state"]) + (" (%s)" % note if note else "")]


def _status_warnings(status, shown):
    return (["WARNING%s: %s" % (shown and " " + shown, problem) for problem in status["problems"]]
            + ["WARNING: Slurm did not answer: %s" % error for error in status["slurm_errors"]]
            + (["NOTE: %s" % status["cluster_note"]] if status["cluster_note"] else []))


def _live_job(status):
    live = [row for row in status["jobs"] if base_state(row["state"]) in LIVE_STATES]
    if not live:
        return "-"
    row = ([row for row in live if base_state(row["state"]) != "PENDING"] or live)[-1]
    text = "%s %s" % (row["job"], base_state(row["state"]))
    return text + (" %s left" % format_duration(row["time_left"]) if row["time_left"] is not None
                   else " (%s)" % row["reason"] if row["reason"] else "")


def _counted(value, shown):
    """A counter as shown, or what its corrupt file (named in a WARNING) leaves: not 0."""
    return "unreadable" if value is None else shown(value)


def format_collection(statuses):
    """A row per chain, then what needs a person or is unread, then each next step."""
    import textwrap
    table = [("DIR", "VERDICT", "LINKS", "WALLTIME/CAP", "RETRIES", "LIVE JOB")]
    notes, steps = [], []
    for status in statuses:
        cap = format_duration(status["max_walltime"]) if status["max_walltime"] else "-"
        if status["budget"]:  # the cap that binds the chain too
            cap += " (budget %s of %s left)" % (format_duration(status["budget"]["left"]),
                                                format_duration(status["budget"]["cap"]))
        relative = os.path.relpath(status["run_dir"])
        shown = status["run_dir"] if relative.startswith("..") else relative
        table.append((shown, status["verdict_word"], str(status["links"]), "%s/%s" % (
            _counted(status["walltime_used"], format_duration), cap), "%s/%s" % (
            _counted(status["retries"], str), "-" if
            status["max_retries"] is None else status["max_retries"]), _live_job(status)))
        attention = status["attention"] or ""  # a problem it names is not repeated
        notes += ["NEEDS ATTENTION %s: %s" % (shown, attention)] if attention else []
        notes += _status_warnings(dict(status, problems=[
            problem for problem in status["problems"] if problem not in attention]), shown)
        # as said, absolute: a step may cd first, and its options name the directory too
        steps += ["next %s: %s" % (shown, status["next"])] if status["next"] else []
    widths = [max(len(row[column]) for row in table) for column in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in table]
    counts = collections.Counter(status["verdict_word"] for status in statuses)
    lines.append("%d chain(s): %s" % (len(statuses), ", ".join(
        "%d %s" % (count, word) for word, count in sorted(counts.items()))))
    lines += [line for index, note in enumerate(notes) if note not in notes[:index]
              for line in textwrap.wrap(note, 100, subsequent_indent="  ",
                                        break_long_words=False, break_on_hyphens=False)]
    return "\n".join(lines + steps) + "\n"  # a step whole: a command is copied from one line


def _pretty_json(value):
    # A lone surrogate (from a state file) is not JSON that every reader takes: its escape text.
    return json.dumps(_each_text(value, lambda text: as_run(text).encode(
        "utf-8", "backslashreplace").decode("utf-8")), indent=2, sort_keys=True) + "\n"


def _each_text(value, change):
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {_each_text(key, change): _each_text(item, change) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_each_text(item, change) for item in value]
    return value


def render_command(run_dir, sbatch_args, **options):
    if "script" in options and not os.path.isfile(options["script"]):
        raise StateError("--script %s: no such file (the successor is submitted with it)"
                         % options["script"])
    made = made_dir(check_path(run_dir, "run_dir"))
    existed = os.path.isdir(made)
    header = ""  # --script's #SBATCH --time limits the links too (unreadable: sbatch says why)
    with contextlib.suppress(StateError):
        header = read_batch_script(options["script"])[0] if "script" in options else ""
    note = check_warn_fits(options.get("warn"), script_directives(header) + sbatch_args,
                           check_max_walltime(options.get("max_walltime")))  # as submit warns
    text = render_prologue(run_dir, sbatch_args=sbatch_args, **options)
    if not existed:
        _log("created the run directory %s (so that #SBATCH --output into it works)" % made)
    _log(*filter(None, [note, module_warning()]))
    _write(text)
    return 0


def submit_command(run_dir, sbatch_args, script, script_args, looks=(), **options):
    import shutil
    if looks:  # at once: a refusal (for want of --time, say) may follow
        _log("WARNING: %s after the script %s go to the script, not to sbatch: put sbatch options "
             "before SCRIPT (write -- SCRIPT ARGS to say they are the script's)"
             % (" ".join(looks), script))
    header = read_batch_script(script)[0]
    tasks, task_args = sweep_options(run_dir, header, sbatch_args)
    # A sweep: a chain per task in DIR/<task>, none queued unless all can be (none is live,
    # every log has its directory).
    for each in tasks or ():
        task_dir = os.path.abspath(os.path.join(check_path(run_dir, "DIR"), str(each)))
        _check_run_dir(task_dir, options.get("force"))
        _chain_defaults(task_dir, script, header, task_args(each))
    given = script_directives(header) + check_sbatch_args(
        task_args(tasks[0]) if tasks else sbatch_args, allowed=("--hold",))
    notes = list(filter(None, [time_limit_note(script, given, os.environ), check_warn_fits(
        options.get("warn"), given, options.get("max_walltime")), module_warning()]))
    python = options.get("python")
    if python and not shutil.which(python):  # the compute nodes may have it
        notes.append("WARNING: --python %s is no program here: every link runs it on the compute "
                     "nodes, and fails before its prologue where they lack it" % python)
    # said once, right before the first sbatch (after every refusal); the cluster asked once
    options.update(before_queueing=lambda: [_log(notes.pop(0)) for _ in list(notes)], slurm=Slurm())
    for done, each in enumerate(tasks or [None]):
        try:
            result = submit_chain(run_dir if each is None else os.path.join(run_dir, str(each)),
                                  script, script_args, task_args(each), task=each, **options)
        except (StateError, ValueError, KeyboardInterrupt) as error:
            if not tasks:
                raise
            queued = ("task %s is" if done == 1 else "tasks %s are") % array_spec(tasks[:done])
            raise StateError("task %d: %s; %s queued: submit the rest with --array=%s" % (
                each, str(error) or "interrupted", queued if done else "nothing is",
                array_spec(tasks[done:])))
        with interrupts_held() as late:  # queued whole: said whole, its job ID too
            _log(*_submitted_lines(result, script))
            _write(result["job"] + "\n")
        if (result["interrupted"] or late) and tasks and each != tasks[-1]:  # the rest stays
            raise StateError("interrupted: task%s queued: submit the rest with --array=%s" % (
                " %s is" % each if done == 0 else "s %s are" % array_spec(tasks[:done + 1]),
                array_spec(tasks[done + 1:])))
    return 0


def _submitted_lines(result, script):
    """What submit says of a chain it submitted (its job ID goes to stdout)."""
    job, lines = result["job"], ["--force: cancelled the live chain's jobs %s" % " ".join(
        result["cancelled"])] if result["cancelled"] else []
    lines.append("submitted job %s: a resumable copy of %s is %s%s" % (
        job, script, result["script"], "; the previous chain's files beside it are kept as *%s"
        % PREVIOUS_SUFFIX if result["previous"] else ""))
    if result["guard_error"]:
        lines.append("WARNING: could not queue a guard for job %s (%s): if it dies before its "
                     "prologue, submit again" % (job, result["guard_error"]))
    if result["held"]:
        lines.append("job %s is held as asked: scontrol release %s starts it (its successors are "
                     "not held)" % (job, job))
    if result["interrupted"]:
        lines.append("Ctrl-C came once job %s was queued: its chain was submitted whole (resumable"
                     "-chain cancel %s stops it)" % (job, shell_quote(os.path.dirname(
                         result["script"]))))
    return lines


def status_command(paths, json=False, check=False):
    run_dirs, bad = [], False
    for path in paths:  # of several, a bad one is kept for a row that says why
        try:
            run_dirs += [run_dir for run_dir in chain_dirs([path]) if run_dir not in run_dirs]
        except StateError:
            if len(paths) == 1:
                raise
            run_dirs, bad = run_dirs + [path], True
    one = run_dirs == paths[:1] == paths  # one chain: all its jobs
    statuses = [chain_status(run_dirs[0])] if one else chains_status(run_dirs)
    if json:
        _write(_pretty_json(statuses[0] if one else statuses))
    else:
        shown = _each_text(statuses, lambda text: text.replace("\r", "\\r").replace(
            "\n", "\\n").replace("\t", "\\t"))  # one line, whatever a state file put in it
        _say(format_status(shown[0]) if one else format_collection(shown))
    # 1: what it shows is incomplete, or (--check) a chain needs a person; 2: a DIR names none
    return EXIT_USAGE if bad else int(any(status["slurm_errors"] or check and status["attention"]
                                          for status in statuses))


def _each_chain(run_dirs, operation):
    """Print the line of ``operation(run_dir, log)`` -> (status, line) of each; the worst status."""
    if len(run_dirs) == 1:
        status, line = operation(run_dirs[0], _log)
        _say(line + "\n")
        return status
    worst = 0
    for run_dir in run_dirs:
        try:
            status, line = operation(run_dir, lambda *texts: _log(*[
                (run_dir + ": " + text).replace("\n", "\\n") for text in texts]))
        except (StateError, ValueError) as error:
            status, line = EXIT_USAGE, "error: %s" % error
        _say(("%s: %s" % (run_dir, line)).replace("\n", "\\n") + "\n")  # forges no line
        worst = max(worst, status)
    return worst


def cancel_command(run_dirs, dry_run=False):
    results = cancel_chains(run_dirs, dry_run)  # all at once; then a line each

    def cancel(run_dir, log):
        result = _raised(results[run_dir])
        log(*result["errors"] + result["log"])
        if result.get("ended"):
            return 0, result["ended"]
        marked = "nothing was queued or running; %s marked cancelled (a new job here starts a " \
            "new chain)"  # a person scancelled its jobs: the journal still shows it working
        if result["dry_run"]:
            return 0, "would cancel: %s" % (" ".join(result["leftover"]) or marked % "it would be")
        if result["leftover"]:  # sent scancel, still there: not said cancelled
            return 1, "cancelled: %s; still pending or running: %s" % (
                " ".join(result["cancelled"]) or "none", " ".join(result["leftover"]))
        return 0, "cancelled: %s" % (" ".join(result["cancelled"]) or marked % "the chain is")
    return _each_chain(run_dirs, cancel)


def budget_command(budget_dir, max_walltime=None, json=False):
    report = (set_budget(budget_dir, max_walltime) if max_walltime is not None
              else budget_report(budget_dir))
    if json:
        _write(_pretty_json(report))
        return 0
    _say("budget in %s: cap %s, used %s, reserved %s by %d link(s), left %s\n" % (
        report["dir"], format_duration(report["cap"]), format_duration(report["used"]),
        format_duration(report["reserved"]), len(report["reservations"]),
        format_duration(report["left"])))
    return 0


def resume_command(run_dirs, sbatch_args, **options):
    _log(*filter(None, [module_warning()]))

    interrupted = []  # Ctrl-C: the chains after it are left as they are

    def resume(run_dir, log):
        if interrupted:
            raise StateError("not resumed: Ctrl-C came before its turn")
        result = resume_chain(run_dir, sbatch_args=sbatch_args, **options)
        with interrupts_held() as late:  # resumed whole: said whole (its job ID next, at once)
            log(*result["log"] + ["job %s runs %s, the first job's copy of its script: edit it "
                                  "to change what the links queued from then on run" % (
                                      result["job"], result["script"])]
                * (os.path.basename(result["script"]) == SCRIPT_COPY))
            words = "resumed: job %s continues the chain (walltime so far %s%s)" % (
                result["job"], format_duration(result["walltime"]), ", of which %d s of the last "
                "link counted now" % result["counted"] if result["counted"] else "")
            if len(run_dirs) == 1:  # the job ID alone on stdout, for scripts
                log(words)
        interrupted.extend([True] * (result["interrupted"] or bool(late)))
        return 0, result["job"] if len(run_dirs) == 1 else words
    return _each_chain(run_dirs, resume)


# The user's commands: ``run(DIR or [DIR...], *what split() took, **the options given)``; split()
# takes apart what argparse does not read (None: the sbatch options after "[-- " if the usage has
# it). The usage names the options (OPTIONS checks them) and whether DIR may be several (DIR...).
UserCommand = collections.namedtuple("UserCommand", "run split usage dirs help description example")
ONE_RUN_DIR = "the run directory holding the state"
USER_COMMANDS = {
    "render": UserCommand(
        run=render_command, split=None, help="print the prologue for a job script",
        usage="DIR [--max-retries N] [--max-walltime T] [--script PATH] [--python PY] "
        "[--budget-dir B] [--notify CMD] [--warn SIG@S] [-- SBATCH_ARGS...]", dirs=ONE_RUN_DIR,
        description="Print the bash prologue to paste after a job script's #SBATCH lines.\n"
        "Options after -- are given to sbatch for every successor. Creates DIR\n"
        "if missing, so that #SBATCH --output=DIR/... works from the first job.",
        example="resumable-chain render runs/gpqa --max-walltime 48:00:00 -- -p gpu"),
    "submit": UserCommand(
        run=submit_command, split=split_submit_argv, dirs=ONE_RUN_DIR,
        usage="DIR [--max-retries N] [--max-walltime T] [--force] [--python PY] [--budget-dir B] "
        "[--notify CMD] [--warn SIG@S] [SBATCH_OPTIONS...] [--] SCRIPT [ARGS...]",
        help="make any batch script resumable and submit it",
        description="Write a resumable copy of SCRIPT into DIR (the prologue after its\n"
        "#!/#SBATCH header), submit it with its guard and print the first job\n"
        "ID. SBATCH_OPTIONS go to the first job and every successor, written as\n"
        "for sbatch (-p debug, --time=4:00:00). Logs go to DIR/slurm-<jobid>.out\n"
        "unless the script or the options set --output. Nothing changes on disk\n"
        "unless sbatch accepts the job. Refuses a DIR whose chain is still queued\n"
        "or running (see --force). --array=SPEC (or #SBATCH --array): a chain per\n"
        "task in DIR/<task>, each queued as a one-task array (docs/arrays.md).",
        example="resumable-chain submit runs/a -p gpu --time=4:00:00 train.sbatch --lr 3e-4"),
    "resume": UserCommand(
        run=resume_command, split=split_resume_argv, dirs="run directories of chains to resume",
        usage="DIR [DIR...] [--max-walltime T] [--max-retries N] [--notify CMD] [--warn SIG@S] "
        "[SBATCH_OPTIONS...]", help="continue a chain that failed, stopped or broke",
        description="Queue one link that continues the chain in DIR: keeps its history and\n"
        "walltime, starts the retries afresh. Refuses a live or COMPLETED chain.\n"
        "SBATCH_OPTIONS replace the recorded ones of the same name for this link\n"
        "and every later one (-p debug replaces a refused partition). With\n"
        "several DIRs, each chain is resumed or left as it was; one line each.",
        example="resumable-chain resume runs/gpqa --max-walltime 72:00:00 -p gpu2"),
    "status": UserCommand(
        run=status_command, split=None, usage="DIR [DIR...] [--json] [--check]",
        dirs="a run directory, or a directory of run directories",
        help="show a chain's jobs, counters and verdict",
        description="Show the jobs of the chain in DIR, its counters and a verdict:\n"
        "running, waiting, finished, stopped, failed, broken or unknown.\n"
        "Several DIRs, or a DIR that holds chains (up to 3 levels below it), give one\n"
        "table with a row per chain (--json: a list). Exit 1 when Slurm did not\n"
        "answer; with --check also when a chain failed, is broken, or would not\n"
        "continue if its running link ended.",
        example="resumable-chain status runs/gpqa --json\n"
        "  resumable-chain status runs --check    # every chain in runs/*/"),
    "cancel": UserCommand(
        run=cancel_command, split=None, usage="DIR [DIR...] [--dry-run]",
        dirs="run directories of chains to cancel", help="stop a chain for good",
        description="Mark the chain cancelled, cancel its pending successors, then its\n"
        "running link. resume continues it later. One line per chain.",
        example="resumable-chain cancel runs/gpqa --dry-run"),
    "budget": UserCommand(
        run=budget_command, split=None, usage="DIR [--max-walltime T] [--json]",
        dirs="the directory holding the budget", help="a walltime budget shared by several chains",
        description="Create a walltime budget in DIR shared by every chain rendered or "
        "submitted\nwith --budget-dir DIR, or change its cap; without --max-walltime, print\n"
        "what is used (links that ended), reserved (links that may still run) and\n"
        "left. Each link reserves min(its time limit, what is left) and lowers its\n"
        "time limit to that; with under a minute left, a chain stops.",
        example="resumable-chain budget runs/collection --max-walltime 200:00:00"),
}


def run_user_command(argv):
    parser = _build_parser()
    command = USER_COMMANDS.get(argv[0]) if argv else None
    dashes = argv.index("--") if "--" in argv else len(argv)
    if command is None or {"-h", "--help"} & set(argv[:dashes]):
        parser.parse_args(argv[:dashes])  # help, the version or the error exit here
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    def named(error):  # every error names the command once
        return ("" if str(error).startswith(argv[0] + ": ") else argv[0] + ": ") + str(error)
    try:  # render: sbatch options after --
        ours, rest = command.split(argv[1:]) if command.split else (argv[1:dashes], (
            (argv[dashes + 1:],) if "[-- " in command.usage else ()))
    except ValueError as error:
        raise ValueError(named(error))
    if not (command.split or rest) and argv[dashes + 1:]:
        raise StateError("%s takes no arguments after --" % argv[0])
    try:
        options = vars(parser.parse_args(argv[:1] + ours))
    except StateError as error:  # the top-level parser's (unrecognized words) names no command
        message = named(error)  # with the option meant, and for render where sbatch's go
        words = message.partition("unrecognized arguments: ")[2].rpartition(" (see --help)")[0]
        hint = "".join(did_you_mean(word.partition("=")[0], usage_options(command.usage))
                       for word in words.split() if word.startswith("--"))
        if argv[0] == "render" and words and not hint:
            hint = "; sbatch options for every successor go after --: resumable-chain render " \
                "DIR [OPTIONS] -- %s" % words
        raise StateError(message.replace(" (see --help)", hint + " (see --help)"))
    return command.run(options.pop("run_dir"), *rest, **options)


def did_you_mean(name, names):
    """" (did you mean --max-retries?)" for a misspelt option name, or ""."""
    import difflib
    close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.8)
    return " (did you mean %s?)" % close[0] if close else ""


# The in-job steps' functions and words, as the rendered prologue, its exit trap, the background
# step, the warning timer and a guard write them. A job queued by an older release runs the
# newest module file: the words stay readable (docs/compatibility.md).
STEPS = {
    "prologue": (prologue_command, "[--max-retries=N] [--max-walltime=T] [--sbatch-arg=ARG...] "
                 "[--budget-dir=B] [--notify=CMD] [--warn=SIG@S] [--lookup=PIPE] --script=PATH "
                 "DIR [-- SCRIPT_ARGS...]"),
    "finished": (finished_command, "DIR"),
    "while-working": (while_working_command, "DIR [--again]"),
    "guard": (guard_command, "DIR JOB [--after=LINK] [SBATCH_NAME=VALUE...]"),
    "warn-work": (warn_command, "SIG@S END SHELL"),
}


if __name__ == "__main__":
    sys.exit(main())
