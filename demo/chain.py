"""A real demo chain: two links time out, the third completes; prints the chain as it goes.

    python3 demo/chain.py [--dir DIR] [--partition P]

Uses the cluster that `sinfo` reaches; if none answers, starts the local single-node cluster
(ci/local-slurm.sh up, needs root on Debian/Ubuntu). Takes two to three minutes.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import resumable_chain as rc  # noqa: E402

WORK = """\
link=$RESUMABLE_CHAIN_LINK  # exported by the prologue, with RESUMABLE_CHAIN_RESUMING and others
echo "link $link (job $SLURM_JOB_ID) starts work; resuming: $RESUMABLE_CHAIN_RESUMING"
if [ "$link" -le 2 ]; then
    echo "link $link: working past the one-minute limit..."
    sleep 600
fi
echo "link $link: done"
"""


def sh(*argv):
    return subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="run directory (default: a new temporary one)")
    parser.add_argument("--partition", help="partition for every link")
    options = parser.parse_args()
    if not _has("sinfo") or sh("sinfo", "-h").returncode != 0:
        print("no Slurm cluster answers: starting the local one (ci/local-slurm.sh up)")
        if subprocess.run(["bash", os.path.join(ROOT, "ci", "local-slurm.sh"), "up"]).returncode:
            print("demo: the local cluster did not start (see above; it needs root on "
                  "Debian/Ubuntu): run `sudo ci/local-slurm.sh up`, then the demo again")
            return 2
    base = options.dir or tempfile.mkdtemp(prefix="resumable-demo-")
    os.makedirs(base, exist_ok=True)
    run_dir = os.path.join(base, "run")
    script = os.path.join(base, "demo.sbatch")
    with open(script, "w") as handle:
        handle.write("#!/bin/bash\n#SBATCH --job-name=resumable-demo\n#SBATCH --time=1\n"
                     "#SBATCH -c 1\n" + WORK)
    argv = ["submit", run_dir, "--python", sys.executable]
    if options.partition:
        argv.append("--partition=" + options.partition)
    status = rc.main(argv + ["--", script])
    if status != 0:
        return status
    print("submitted; logs in %s" % run_dir)
    shown = None
    deadline = time.time() + 900
    while time.time() < deadline:
        report = rc.chain_status(run_dir)
        summary = ", ".join("%s %s" % (row["job"], row["state"]) for row in report["jobs"])
        if summary != shown:
            print("%s  %s | %s" % (time.strftime("%H:%M:%S"), summary, report["verdict"]))
            shown = summary
        if report["verdict"].split(":")[0] in ("finished", "stopped", "failed", "broken"):
            time.sleep(3)
            break
        time.sleep(5)
    print()
    return rc.main(["status", run_dir])


def _has(command):
    return any(os.access(os.path.join(path, command), os.X_OK)
               for path in os.environ.get("PATH", "").split(os.pathsep))


if __name__ == "__main__":
    sys.exit(main())
