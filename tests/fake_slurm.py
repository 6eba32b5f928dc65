"""The fake Slurm of the tests and the benchmark: sbatch, sacct, scontrol, squeue, scancel.

One fake, used two ways: as commands on PATH (``fake_slurm.py COMMAND ...``,
for jobs run by bash) and in-process as a replacement of
``resumable_chain.run_slurm`` (``InProcess``: forked crash-injection children,
a fake clock, the benchmark's scale figures), both over the same cluster.
Its output is checked against the real outputs recorded in
tests/slurm_outputs (test_resumable_chain.py's contract test).

One JSON file (``$FAKE_SLURM_STATE``) is the cluster; every call is appended
to ``$FAKE_SLURM_STATE.calls`` (argv and the SLURM_*/SBATCH_* environment)
so tests can check what was run. Knobs a test may set on the cluster:

* ``jobs[ID]``: state, elapsed, start, end, nodes (default: the fake's node once started),
  runs (earlier runs of a requeued ID), reason (squeue's and scontrol's), wrap (sbatch
  --wrap), dependency, time_limit, held (sbatch --hold until scontrol release),
  in_controller, sacct_hidden_calls (sacct prints nothing for that many calls),
  sacct_lag_state (what sacct shows instead while hidden), sacct_state (what sacct shows once
  visible, when the controller shows another state), visible_at (epoch seconds before which
  sacct prints nothing);
* ``sacct_down``, ``scontrol_down`` (squeue too), ``squeue_down``, ``sbatch_error``: make a
  command fail as Slurm does; ``sbatch_wrap_error``: only ``sbatch --wrap`` (a guard) fails;
  ``sbatch_link_error``: every other sbatch fails (from the link ID ``sbatch_link_error_from``);
  ``sbatch_lost_answer``: sbatch creates the job, then fails as when the controller's answer
  timed out;
* ``scancel_ignored``: scancel answers 0 but cancels nothing (a job that will not die);
  ``scancel_down``: scancel cannot reach the controller (22.05's words);
* ``name``: the cluster's name (default ``local``); ``-M OTHER`` is refused as Slurm refuses a
  cluster its database does not know (sacct prints nothing);
* ``partitions``: {name: {"DefaultTime": ..., "MaxTime": ...}}, the first the default one;
* ``enforce`` (AccountingStorageEnforce), ``assoc_max_submit``, ``qos_max_submit``: the job
  limits sbatch enforces and sacctmgr shows; ``jobs_allowed``: sbatch refuses past it whatever
  the config says (jobs queued after submit looked); ``sacctmgr_down``;
* ``hang``: {command: seconds} sleeps before answering; ``hang_after``: after acting, before
  it answers (sbatch's job is queued);
* ``latency``: seconds every command sleeps before answering.
"""
import collections
import fcntl
import json
import os
import sys
import time

Result = collections.namedtuple("Result", "returncode stdout stderr")  # as run_slurm returns

FIELDS_ALL = {"JobIDRaw", "JobID", "State", "ElapsedRaw", "Start", "End", "ExitCode", "Submit",
              "NodeList", "Timelimit"}
NODE = "node1"  # the fake cluster's one node
PARTITIONS = {"debug": {"DefaultTime": "01:00:00", "MaxTime": "UNLIMITED"}}  # the first: Default
PARTITION_LINE = (
    "PartitionName=%(name)s AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL "
    "Default=%(default)s QoS=N/A DefaultTime=%(DefaultTime)s DisableRootJobs=NO ExclusiveUser=NO "
    "GraceTime=0 Hidden=NO MaxNodes=UNLIMITED MaxTime=%(MaxTime)s MinNodes=0 LLN=NO "
    "MaxCPUsPerNode=UNLIMITED Nodes=node1 PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO "
    "OverSubscribe=NO OverTimeLimit=NONE PreemptMode=CANCEL State=UP TotalCPUs=16 TotalNodes=1 "
    "SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED "
    "TRES=cpu=16,mem=8000M,node=1,billing=16\n")


def load(path):
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        text = ""
    cluster = json.loads(text) if text.strip() else {}
    cluster.setdefault("jobs", {})
    cluster.setdefault("next_id", 1000)
    return cluster


def save(path, cluster):
    # Atomically: a forked test child may be killed at any instant, also while it answers.
    temporary = "%s.%d" % (path, os.getpid())
    with open(temporary, "w") as handle:
        handle.write(json.dumps(cluster, indent=1, sort_keys=True))
    os.replace(temporary, path)


def option(argv, short, long_name):
    for index, argument in enumerate(argv):
        if argument in (short, long_name) and index + 1 < len(argv):
            return argv[index + 1]
        if long_name and argument.startswith(long_name + "="):
            return argument.split("=", 1)[1]
        if short and argument.startswith(short) and len(argument) > 2 and not argument.startswith("--"):
            return argument[2:]
    return None


def seconds_to_clock(seconds):
    days, rest = divmod(int(seconds), 86400)
    text = "%02d:%02d:%02d" % (rest // 3600, rest // 60 % 60, rest % 60)
    return "%d-%s" % (days, text) if days else text


def sbatch(argv, cluster, now):
    wrap = option(argv, None, "--wrap")
    error = cluster.get("sbatch_error") or cluster.get(
        "sbatch_link_error" if wrap is None else "sbatch_wrap_error")
    if wrap is None and cluster.get("next_id", 0) < cluster.get("sbatch_link_error_from", 0):
        error = cluster.get("sbatch_error")  # the links before that ID are queued
    if error:
        return 1, "", "sbatch: error: %s\n" % error
    if len(live_jobs(cluster, os.geteuid())) >= min(submit_limits(cluster) or [float("inf")]):
        return 1, "", ("sbatch: error: Batch job submission failed: Job violates accounting/QOS "
                       "policy (job submit limit, user's size and/or time limits)\n")
    script_index = len(argv) if wrap is not None else next(
        (i for i, a in enumerate(argv) if not a.startswith("-") and os.path.isfile(a)), None)
    if script_index is None:  # as sbatch says when the script is gone
        return 1, "", "sbatch: error: Unable to open file %s\n" % next(
            (a for a in argv if "/" in a and not a.startswith("-")), argv[-1])
    counter = "next_id" if wrap is None else "next_wrap_id"  # guards apart: tests name link IDs
    job_id = str(cluster.setdefault(counter, 900000))
    cluster[counter] += 1
    cluster["jobs"][job_id] = {
        "state": "PENDING", "elapsed": 0, "start": "Unknown", "end": "Unknown",
        "dependency": option(argv, "-d", "--dependency") or "",
        "time_limit": option(argv, "-t", "--time"), "in_controller": True,
        "script": argv[script_index] if wrap is None else None, "name": option(argv, "-J",
                                                                                "--job-name"),
        "args": argv[script_index + 1:], "options": argv[:script_index], "wrap": wrap,
        "cwd": os.getcwd(), "held": "--hold" in argv or "-H" in argv,
        "array": option(argv[:script_index], "-a", "--array"),  # one task: submit's and links'
        "requeue": "0" if "--no-requeue" in argv else "1", "uid": os.geteuid()}
    if wrap is not None:  # what sbatch --wrap writes
        cluster["jobs"][job_id]["script_text"] = ("#!/bin/sh\n# This script was created by "
                                                  "sbatch --wrap.\n\n%s\n" % wrap)
    else:
        with open(argv[script_index], "rb") as handle:  # Slurm keeps the text, not the path
            cluster["jobs"][job_id]["script_text"] = handle.read().decode("utf-8", "replace")
    if cluster.get("sbatch_lost_answer"):
        return 1, "", ("sbatch: error: Batch job submission failed: Socket timed out on send/recv "
                       "operation\n")
    if "--parsable" in argv:
        return 0, job_id + "\n", ""
    return 0, "Submitted batch job %s\n" % job_id, ""


LIVE = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING")


def live_jobs(cluster, uid):
    return [job_id for job_id, job in cluster["jobs"].items()
            if job["state"].split()[0] in LIVE and job.get("uid", uid) == uid]


def submit_limits(cluster):
    """The limits sbatch enforces (with AccountingStorageEnforce=limits): MaxSubmitJobs of the
    user's association and MaxSubmitJobsPerUser of QOS normal."""
    limits = [cluster["jobs_allowed"]] if "jobs_allowed" in cluster else []  # whatever it says
    if "limits" not in cluster.get("enforce", "none"):
        return limits
    return limits + [n for n in (cluster.get("assoc_max_submit"), cluster.get("qos_max_submit"))
                     if n]


def sacctmgr(argv, cluster, now):
    """``show assoc where user=U format=cluster,account,user,maxsubmit,defaultqos`` and ``show
    qos format=name,maxsubmitpu``, as 22.05 prints them (tests/slurm_outputs/22.05)."""
    if cluster.get("sacctmgr_down"):
        return 1, "", ("sacctmgr: error: Problem talking to the database: Connection refused\n")
    if "qos" in argv[3:4]:
        return 0, "normal|%s\n" % (cluster.get("qos_max_submit") or ""), ""
    user = next(word.split("=", 1)[1] for word in argv if word.startswith("user="))
    return 0, "%s|acct|%s|%s|\n" % (cluster.get("name", "local"), user,
                                   cluster.get("assoc_max_submit") or ""), ""


def sacct(argv, cluster, now):
    if cluster.get("sacct_down"):
        return 1, "", ("sacct: error: slurm_persist_conn_open_without_init: failed to open persistent "
                       "connection to host:localhost:6819: Connection refused\n"
                       "sacct: error: Problem talking to the database: Connection refused\n")
    fields = (option(argv, "-o", "--format") or "JobID,State").split(",")
    unknown = [field for field in fields if field not in FIELDS_ALL]
    if unknown:
        return 1, "", "sacct: error: Invalid field requested: \"%s\"\n" % unknown[0]
    ids = (option(argv, "-j", "--jobs") or "").split(",")
    lines = []
    for job_id in ids:
        job = cluster["jobs"].get(job_id)
        if not job:
            continue
        job["sacct_calls"] = job.get("sacct_calls", 0) + 1
        if job.get("visible_at", 0) > now or job.get("sacct_hidden_calls", 0) >= job["sacct_calls"]:
            if job.get("sacct_lag_state"):
                lines.append(render(job_id, dict(job, state=job["sacct_lag_state"]), fields))
            continue
        runs = job.get("runs", []) if ("-D" in argv or "--duplicates" in argv) else []
        for run in runs:
            lines.append(render(job_id, run, fields))
        lines.append(render(job_id, dict(job, state=job.get("sacct_state") or job["state"]), fields))
        if "-X" not in argv and "--allocations" not in argv and job["state"] != "PENDING":
            step_state = "CANCELLED" if job["state"] in ("TIMEOUT", "PREEMPTED") or job["state"].startswith("CANCELLED") else job["state"]
            lines.append(render(job_id + ".batch", dict(job, state=step_state), fields))
            lines.append(render(job_id + ".extern", dict(job, state="COMPLETED"), fields))
    if "-P" not in argv and "--parsable2" not in argv:
        return 0, "".join(" ".join(("%-10s" % value)[:10] for value in line.split("|")) + "\n" for line in lines), ""
    return 0, "".join(line + "\n" for line in lines), ""


def nodes_of(job):
    """The job's node list ("" if it never got one): ``nodes`` if set, else the fake's node
    once it started."""
    nodes = job.get("nodes")
    started = job.get("start", "Unknown") not in ("Unknown", "None")
    return (NODE if started else "") if nodes is None else nodes


def render(job_id, job, fields):
    values = {"JobIDRaw": job_id, "JobID": array_id(job_id, job, "%s_[%s]"), "State": job["state"],
              "ElapsedRaw": str(job.get("elapsed", 0)), "Start": job.get("start", "Unknown"),
              "End": job.get("end", "Unknown"), "ExitCode": job.get("exit_code", "0:0"),
              "Submit": job.get("submit", "2026-11-30T00:00:00"),
              "NodeList": nodes_of(job) or "None assigned",
              "Timelimit": "" if "." in job_id else limit_clock(job)}  # steps: none (seen)
    return "|".join(values[field] for field in fields)


def limit_clock(job):
    """The job's time limit as scontrol, squeue and sacct show it: minutes as a clock."""
    limit = job.get("time_limit") or "01:00:00"
    return seconds_to_clock(int(limit) * 60) if str(limit).isdigit() else limit


def array_id(job_id, job, pending="%s_%s"):
    """How Slurm names a (one-task) array's job when it does not use its raw ID: 14_3, or
    pending ``14_[3]`` (sacct; squeue's %i)."""
    if not job.get("array") or ".batch" in job_id or ".extern" in job_id:
        return job_id
    return (pending if job["state"] == "PENDING" else "%s_%s") % (job_id, job["array"])


def scontrol(argv, cluster, now):
    if argv and argv[0] == "release":
        job = cluster["jobs"].get(argv[1])
        if not job:
            return 1, "", "scontrol: error: Invalid job id specified\n"
        job["held"] = False
        return 0, "", ""
    if argv and argv[0] == "requeue":  # a batch job of the caller's: pending again, same ID
        job = cluster["jobs"].get(argv[1])
        if not job:
            return 1, "", "scontrol: error: Invalid job id specified\n"
        job.setdefault("runs", []).append(dict(job, state="REQUEUED", runs=[]))
        job.update(state="PENDING", reason="BeginTime")
        return 0, "", ""
    if argv and argv[0] == "update":
        spec = dict(item.split("=", 1) for item in argv[1:] if "=" in item)
        job = cluster["jobs"].get(spec.get("JobId") or spec.get("jobid"))
        if not job:
            return 1, "", "scontrol: error: Invalid job id specified\n"
        if "TimeLimit" in spec or "timelimit" in spec:
            job["time_limit"] = spec.get("TimeLimit") or spec.get("timelimit")
        if "Requeue" in spec:
            job["requeue"] = spec["Requeue"]
        return 0, "", ""
    if argv[:2] == ["show", "partition"]:  # as 22.05 prints it (-o), the knobs' limits
        shown = [(name, limits) for name, limits in cluster.get("partitions", PARTITIONS).items()
                 if argv[-1] in ("-o", name)]
        if not shown:
            return 1, "Partition %s not found\n" % argv[-1], ""
        return 0, "".join(PARTITION_LINE % dict(limits, name=name, default=(
            "YES" if index == 0 else "NO")) for index, (name, limits) in enumerate(shown)), ""
    if argv[:2] == ["show", "config"]:
        return 0, ("Configuration data as of 2026-11-30T00:00:00\n"
                   "AccountingStorageEnforce = %s\nClusterName             = %s\n"
                   "MaxArraySize            = %d\n" % (cluster.get("enforce", "none"),
                                                        cluster.get("name", "local"),
                                                        cluster.get("max_array_size", 1001))), ""
    job_id = argv[-1]
    job = cluster["jobs"].get(job_id)
    if cluster.get("scontrol_down"):
        return 1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    if not job or not job.get("in_controller", True):
        return 1, "", "slurm_load_jobs error: Invalid job id specified\n"
    limit = limit_clock(job)
    start = job.get("start", "Unknown")
    if start == "Unknown" and job.get("elapsed", 0):  # a job that ran has a start time
        start = "2026-11-30T01:00:00"
    text = ("JobId=%s " % job_id + ("ArrayJobId=%s ArrayTaskId=%s " % (job_id, job["array"])
                                     if job.get("array") else "") + "JobName=%s UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=%d Nice=0 "
            "Account=(null) QOS=(null) JobState=%s Reason=%s Dependency=(null) Requeue=%s "
            "Restarts=%d BatchFlag=1 Reboot=0 ExitCode=%s RunTime=%s TimeLimit=%s TimeMin=N/A "
            "SubmitTime=2026-11-30T00:00:00 StartTime=%s EndTime=%s Deadline=N/A "
            "PreemptEligibleTime=2026-11-30T00:00:00 PreemptTime=%s SuspendTime=None Partition=debug "
            "NodeList=%s Command=%s WorkDir=/tmp" % (
                job.get("name") or "job", 0 if job.get("held") else 1,
                job["state"].split()[0], job.get("reason") or (
                    "JobHeldUser" if job.get("held") else "None"),
                                        job.get("requeue", "1"),
                                        len(job.get("runs", [])), job.get("exit_code", "0:0"),
                                        seconds_to_clock(job.get("elapsed", 0)),
                                        limit, start, job.get("end", "Unknown"),
                                        job.get("preempt_time", "None"),
                                        nodes_of(dict(job, start=start)),
                                        job.get("script") or "/tmp/job.sh"))
    if "-o" not in argv and "--oneliner" not in argv:
        text = text.replace(" Requeue=", "\n   Requeue=").replace(" RunTime=", "\n   RunTime=")
    return 0, text + "\n", ""


def squeue(argv, cluster, now):
    if cluster.get("squeue_down") or cluster.get("scontrol_down"):  # the controller is down
        return 1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    states = option(argv, "-t", "--states")
    ids = option(argv, "-j", "--jobs")
    fmt = option(argv, "-o", "--format") or "%i %T"
    user = option(argv, "-u", "--user")
    try:
        user and _uid(user)
    except KeyError:  # as 22.05 says it: exit 0, no job
        return 0, "", "squeue: error: Invalid user: %s\n" % user
    lines = []
    for job_id, job in sorted(cluster["jobs"].items(), key=lambda item: int(item[0])):
        base = job["state"].split()[0]
        if base not in ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"):
            continue
        if ids and job_id not in ids.split(","):
            continue
        if states and base not in ("PENDING" if s in ("PD", "PENDING") else s for s in states.split(",")):
            continue
        dependency = job.get("dependency") or "(null)"
        kind, _, after = dependency.partition(":")
        if cluster["jobs"].get(after, {}).get("array"):  # on an array: all its tasks
            dependency += "_*"
        if dependency != "(null)":
            dependency += "(unfulfilled)"
        limit = limit_clock(job)
        start = job.get("start", "N/A")
        line = (fmt.replace("%i", array_id(job_id, job, "%s_[%s]")).replace("%A", job_id)
                .replace("%T", base).replace("%E", dependency)
                .replace("%o", " ".join([os.path.abspath(job.get("script") or "/tmp/job.sh")]
                                        + job.get("args", [])))  # 22.05: with its arguments
                .replace("%M", seconds_to_clock(job.get("elapsed", 0)))
                .replace("%S", "N/A" if start == "Unknown" else start).replace("%l", limit)
                .replace("%r", job.get("reason") or ("JobHeldUser" if job.get("held")
                                                      else "Dependency"
                                                      if dependency != "(null)" else "None"
                                                      if base == "RUNNING" else "Priority")))
        lines.append(line)
    if ids and not lines and len(ids.split(",")) == 1 and ids not in cluster["jobs"]:
        return 1, "", "slurm_load_jobs error: Invalid job id specified\n"
    return 0, "".join(line + "\n" for line in lines), ""


def _uid(user):
    import pwd
    return user if user.isdigit() else str(pwd.getpwnam(user).pw_uid)


def scancel(argv, cluster, now):
    if cluster.get("scancel_ignored"):
        return 0, "", ""
    if cluster.get("scancel_down"):
        return 8, "", "".join("scancel: error: Kill job error on job id %s: Unable to contact "
                              "slurm controller (connect failure)\n" % job_id
                              for job_id in reversed(argv) if not job_id.startswith("-"))
    user = next((word.split("=", 1)[1] for word in argv if word.startswith("--user=")), None)
    errors = []
    for job_id in argv:
        job = cluster["jobs"].get(job_id)
        owner = str(job.get("uid", os.geteuid())) if job else None
        if user is not None and not job_id.startswith("-") and not (job and job["state"].split()[
                0] in ("PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING")):
            errors.append("scancel: error: Kill job error on job id %s: Invalid job id specified"
                          % job_id)  # 22.05-26.05 with --user (without it: silent, status 0)
            continue
        if job and user is not None and owner != _uid(user):
            continue  # as scancel's filters: a job of another user is left alone
        if job and os.geteuid() != 0 and owner != str(os.geteuid()):
            errors.append("scancel: error: Kill job error on job id %s: Access/permission denied"
                          % job_id)  # Slurm: only a job's owner (or root) signals it
            continue
        if job and job["state"].split()[0] in ("PENDING", "RUNNING", "SUSPENDED", "CONFIGURING"):
            job["state"] = "CANCELLED by %d" % os.geteuid()
    return (1, "", "".join(error + "\n" for error in errors)) if errors else (0, "", "")


COMMANDS = {"sbatch": sbatch, "sacct": sacct, "scontrol": scontrol, "squeue": squeue, "scancel": scancel,
            "sacctmgr": sacctmgr}


def other_cluster(command, argv, cluster):
    """(argv without -M/--clusters, the refusal of a cluster this one is not, or None)."""
    named, rest, words = None, [], iter(argv)
    for word in words:
        if word in ("-M", "--clusters"):
            named = next(words, "")
        elif word.startswith(("--clusters=", "-M")):
            named = word.split("=", 1)[1] if "=" in word else word[2:]
        else:
            rest.append(word)
    if named is None or named == cluster.get("name", "local"):
        return rest, None
    if command == "sacct":
        return rest, (0, "", "")
    return rest, (1, "", "%s: error: No cluster '%s' known by database.\n%s: error: '%s' can't be "
                  "reached now, or it is an invalid entry for --cluster.  Use 'sacctmgr list "
                  "clusters' to see available clusters.\n" % (command, named, command, named))


def answer(command, argv, path, now=None, environ=None):
    """Record one call and answer it from the cluster in ``path``: (status, stdout, stderr)."""
    now = time.time() if now is None else now
    with open(path + ".calls", "a") as calls:
        calls.write(json.dumps({"command": command, "argv": argv, "cwd": os.getcwd(),
                                "time": now, "own_session": os.getsid(0) == os.getpid(), "env": {
                                    k: v for k, v in (environ or {}).items()
                                    if k.startswith(("SLURM_", "SBATCH_", "SACCT_", "SQUEUE_"))
                                    or k in ("LC_ALL", "RESUMABLE_CHAIN_NAMED")
                                    or k.startswith("RESUMABLE_CHAIN_KEPT_")}}) + "\n")
    with open(path + ".lock", "a") as lock:
        fcntl.lockf(lock, fcntl.LOCK_EX)
        cluster = load(path)
        result = respond(command, argv, cluster, now)
        save(path, cluster)
    return result


def respond(command, argv, cluster, now):
    """What the command prints for this cluster: (status, stdout, stderr)."""
    rest, refused = other_cluster(command, argv, cluster)
    result = refused or COMMANDS[command](rest, cluster, now)
    if command == "sbatch" and result[0] == 0 and rest != argv:  # -M: "id;cluster"
        result = (0, result[1].strip() + ";" + cluster.get("name", "local") + "\n", result[2])
    return result


class InProcess(object):
    """The fake as a replacement of ``resumable_chain.run_slurm`` (same arguments, same result).

    ``clock`` is what ``visible_at`` is compared with (a test's fake clock);
    ``after_submit`` runs once sbatch has queued a job, before the caller
    hears back (crash injection kills the caller there).
    """

    def __init__(self, path, clock=time.time, after_submit=None):
        self.path, self.clock, self.after_submit = path, clock, after_submit

    def __call__(self, argv, timeout=None, cwd=None, environment=None):
        status, out, err = answer(argv[0], list(argv[1:]), self.path, self.clock())
        if argv[0] == "sbatch" and status == 0 and self.after_submit:
            self.after_submit()
        result = Result(status, out, err)
        return result

    def jobs(self):
        return load(self.path)["jobs"]

    def successors_of(self, job_id):
        return sorted((successor for successor, job in self.jobs().items()
                       if job.get("dependency") == "afternotok:%s" % job_id), key=int)


def main():
    command, argv = sys.argv[1], sys.argv[2:]
    path = os.environ["FAKE_SLURM_STATE"]
    cluster = load(path)
    delay = cluster.get("latency", 0) + cluster.get("hang", {}).get(command, 0)
    if delay:
        time.sleep(delay)
    status, out, err = answer(command, argv, path, environ=os.environ)
    time.sleep(cluster.get("hang_after", {}).get(command, 0))
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


if __name__ == "__main__":
    sys.exit(main())
