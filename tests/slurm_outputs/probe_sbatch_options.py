"""Derive sbatch's option table from a real sbatch: every long and short option it accepts and
whether it takes a value, as getopt_long sees it (exact name or unique prefix; a value after
'=' or, when required, in the next word); a short option's line names its long one when
`sbatch --help` pairs them.

    python3 probe_sbatch_options.py SBATCH SLURM_TARBALL > RELEASE/sbatch-options.txt

Candidate names are those `sbatch --help` and `--usage` print and every `.name = "..."` of the
tarball's src/common/slurm_opt.c (options such as --hint are in no help text). Each is probed
with `--test-only` and an empty script, so nothing is ever submitted: getopt's own message says
whether the option exists and whether it takes a value.
"""
import os
import re
import string
import subprocess
import sys
import tarfile


def probe(sbatch, word):
    environ = {name: os.environ[name] for name in ("PATH", "SLURM_CONF") if name in os.environ}
    result = subprocess.run([sbatch, "--test-only", word], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                            env=environ, universal_newlines=True)  # no SBATCH_* defaults
    return result.stdout + result.stderr


def long_kind(sbatch, name):
    said = probe(sbatch, "--%s=x" % name)
    if "unrecognized option" in said or "is ambiguous" in said:
        return None
    if "doesn't allow an argument" in said:
        return "flag"
    return "value" if "requires an argument" in probe(sbatch, "--" + name) else "optional"


def short_kind(sbatch, letter):
    said = probe(sbatch, "-" + letter)
    if "invalid option" in said:
        return None
    return "value" if "requires an argument" in said else "flag"


def main(sbatch, tarball):
    names = set(re.findall(r"--([a-z][a-z0-9-]*)", probe(sbatch, "--help") + probe(sbatch, "--usage")))
    with tarfile.open(tarball) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("src/common/slurm_opt.c"))
        names |= set(re.findall(r'\.name = "([a-z0-9-]+)"', archive.extractfile(member).read().decode()))
    version = subprocess.run([sbatch, "--version"], stdout=subprocess.PIPE,
                             universal_newlines=True).stdout.strip()
    print("# %s: sbatch's options and whether each takes a value (probe_sbatch_options.py)" % version)
    for name in sorted(names):
        kind = long_kind(sbatch, name)
        if kind:
            print("--%s %s" % (name, kind))
    pairs = dict(re.findall(r"^\s+-([A-Za-z]), (--[a-z][a-z0-9-]*)", probe(sbatch, "--help"),
                            re.MULTILINE))
    for letter in string.ascii_letters:
        kind = short_kind(sbatch, letter)
        if kind:
            print(("-%s %s %s" % (letter, kind, pairs.get(letter, ""))).rstrip())


if __name__ == "__main__":
    main(*sys.argv[1:])
