"""--chongming-seed: one seed for the hypothesis checks, the stress schedules and the faults.

``random`` is drawn once, in the controller, and every xdist worker runs on it; the report
names it, and a bad value is one usage error before any test runs.
"""

from __future__ import annotations

import types

import pytest
from plugin_helpers import load_report, run

from chongming_conformance.plugin.options import resolve_seed

#: One property check and one stress scenario: enough to see each part take the seed.
SELECTED = "test_xp_create_exclusive or test_query_limit"


def test_a_seed_that_is_not_a_number_is_one_usage_error(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--chongming-store=reference_stores.memory:make_store",
                 "--chongming-seed=seven")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--chongming-seed='seven': give a whole number >= 0, or "
                                 "'random' for a fresh one.*"])


def test_random_is_drawn_once_and_every_part_of_the_run_uses_it(
    pytester: pytest.Pytester,
) -> None:
    result = run(pytester, "--chongming-store=reference_stores.sqlite:make_store",
                 "--chongming-seed=random", "--chongming-stress=quick",
                 "--chongming-stress-rounds=3", "-n", "2", "-k", SELECTED,
                 "--chongming-report=r.json")
    out = result.stdout.str()
    assert result.ret == 0, out
    doc = load_report(pytester.path / "r.json")
    seed = doc["run"]["seed"]
    assert isinstance(seed, int) and seed >= 0
    assert doc["run"]["stress_profile"]["seed"] == seed  # the workers' and nemesis's seed
    assert doc["run"]["hypothesis_seed"] == str(seed)  # the property checks' seed
    assert f"seeds: --chongming-seed={seed} (stress and fault schedules {seed}, " \
           f"hypothesis {seed})" in out


class _Config:
    """Just what resolve_seed reads and writes: the parsed option values."""

    def __init__(self, seed: str | None) -> None:
        self.option = types.SimpleNamespace(chongming_seed=seed)

    def getoption(self, name: str) -> object:
        return getattr(self.option, name)


def test_random_is_written_back_so_xdist_workers_get_the_drawn_seed() -> None:
    """xdist hands each worker the controller's option values: the drawn seed, not 'random'
    (which each worker would draw again)."""
    config = _Config("random")
    seed = resolve_seed(config)  # type: ignore[arg-type]
    assert seed is not None and config.option.chongming_seed == str(seed)
    assert resolve_seed(config) == seed  # type: ignore[arg-type]
    assert resolve_seed(_Config(None)) is None  # type: ignore[arg-type]
    assert resolve_seed(_Config("0")) == 0  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match="whole number >= 0"):
        resolve_seed(_Config("-3"))  # type: ignore[arg-type]
