"""Issue 31 part 1 (arrays are still refused): their syntax, as real sbatch takes it."""
import os

import pytest

import resumable_chain as rc


def _sbatch_array_specs():
    path = os.path.join(os.path.dirname(__file__), "slurm_outputs", "26.05", "arrays",
                        "sbatch-array-specs.txt")
    with open(path) as handle:
        return [line.rstrip("\n").split("|", 2) for line in handle if not line.startswith("#")]


@pytest.mark.parametrize("spec, status, said", _sbatch_array_specs())
def test_an_array_is_refused_exactly_when_real_sbatch_refuses_it(spec, status, said):
    if status == "0":
        rc.parse_array(spec, 1001)
    else:
        with pytest.raises(ValueError, match="MaxArraySize 1001|not a count"):
            rc.parse_array(spec, 1001)


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
    assert rc.parse_array(spec, 1001) == expected
