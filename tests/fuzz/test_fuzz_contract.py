"""Property-based fuzzing of the CLI contract (issue 15): every format's seed, mutated by
hypothesis, through ``analyze``/``export`` (traces), ``diff`` (reports) and ``check``
(baselines). Kept short for CI (``TRACECLASS_FUZZ_EXAMPLES`` per seed, default 25);
``benchmarks/fuzz_campaign.py`` runs the same mutations at length.
"""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_contract import check, commands
from fuzz_mutate import make_input
from fuzz_seeds import KINDS, build_seeds

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("TRACECLASS_FUZZ_EXAMPLES", "25"))


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return build_seeds(tmp_path_factory.mktemp("seeds"))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("work")


@pytest.mark.parametrize("name", sorted(KINDS))
def test_seed_meets_the_contract(seeds, work, name):
    """The unmutated seeds pass: a report (not a rejection) for each."""
    for argv, inputs, fmt, output in commands(KINDS[name], seeds[name], seeds, work):
        got = check(argv, inputs, fmt, output)
        assert got.rc in (0, 1), (argv, got.err)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_mutated_inputs_meet_the_contract(seeds, work, name):
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(rng=st.randoms(use_true_random=False))
    def run(rng):
        folder = work / "in"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        out = work / "out"
        out.mkdir(exist_ok=True)
        path = make_input(rng, seeds[name], folder)
        for argv, inputs, fmt, output in commands(KINDS[name], path, seeds, out):
            check(argv, inputs, fmt, output)

    run()
