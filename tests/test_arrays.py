"""Issue 31 part 1 (arrays are still refused): their syntax, as real sbatch takes it."""
import os

import pytest

import resumable_chain as rc


# Not in the module until arrays are wired in (issue 29: test-only parsers live in the tests).
def parse_array(text, max_array_size):
    """(sorted task IDs, throttle or None) of an ``--array`` value as sbatch and slurmctld take
    it (slurm_parse_array_tok): comma-separated ``I``, ``I-J`` or ``I-J:STEP`` (brackets
    allowed), then ``%N`` (the first ``%`` counts; 0 means none); every ID below MaxArraySize.
    An empty value is no array: None. ValueError, in one line, for what slurmctld refuses.
    (Issue 31 part 1: arrays are still refused; this is their syntax, checked ahead of sbatch.)"""
    if not text:
        return None
    indexes, _, throttle = text.partition("%")
    tasks = set()
    for token in indexes.split(","):
        word = token.strip("[]")
        first, dash, rest = word.partition("-")
        last, colon, step = rest.partition(":")
        numbers = [first] + ([last] if dash else []) + ([step] if colon else [])
        if not all(rc.is_digits(number, 9) for number in numbers) or (colon and not dash) or \
                int(last if dash else first) < int(first) or \
                int(last if dash else first) >= max_array_size or \
                colon and not 0 < int(step) < max_array_size:
            raise ValueError("--array=%s: %r is not an index sbatch takes (I, I-J or I-J:STEP, "
                             "each below MaxArraySize %d; e.g. 0-99%%10 or 1,3,5-9:2)"
                             % (text, token, max_array_size))
        tasks.update(range(int(first), int(last if dash else first) + 1,
                           int(step) if colon else 1))
    digits = throttle.split("%")[0]
    if throttle and not rc.is_digits(digits, 9):
        raise ValueError("--array=%s: the throttle %%%s is not a count" % (text, throttle))
    return sorted(tasks), int(digits) or None if throttle else None


def _sbatch_array_specs():
    path = os.path.join(os.path.dirname(__file__), "slurm_outputs", "26.05", "arrays",
                        "sbatch-array-specs.txt")
    with open(path) as handle:
        return [line.rstrip("\n").split("|", 2) for line in handle if not line.startswith("#")]


@pytest.mark.parametrize("spec, status, said", _sbatch_array_specs())
def test_an_array_is_refused_exactly_when_real_sbatch_refuses_it(spec, status, said):
    if status == "0":
        parse_array(spec, 1001)
    else:
        with pytest.raises(ValueError, match="MaxArraySize 1001|not a count"):
            parse_array(spec, 1001)


@pytest.mark.parametrize("spec, expected", [
    ("0-4", ([0, 1, 2, 3, 4], None)),
    ("1,3,5-9:2", ([1, 3, 5, 7, 9], None)),
    ("0-99%10", (list(range(100)), 10)),
    ("[0-3]%2", ([0, 1, 2, 3], 2)),
    ("0-3,2", ([0, 1, 2, 3], None)),  # overlapping: one task each
    ("0-3%0", ([0, 1, 2, 3], None)),  # %0: no throttle (slurmctld keeps only N > 0)
    ("1-5%2%3", ([1, 2, 3, 4, 5], 2)),  # the first % counts
    ("", None),  # no array
])
def test_an_array_names_its_tasks_and_throttle(spec, expected):
    assert parse_array(spec, 1001) == expected
