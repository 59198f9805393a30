"""The key-value store of ``kv_stores`` (single-key CAS, indexes by hand) against the mixed
workload: the careful store passes it on several seeds, and three of the five broken
variants of issue 31, item 4 are caught within a bounded number of seeds -- blamed on
XP-MIXED-WORKLOAD, by an anomaly (never by an error the run could not judge).

Needs a Redis server (``CHONGMING_TEST_REDIS``, default ``redis://127.0.0.1:6379/0``) and the
``redis`` package (the ``dev`` extra). Without them every test here is skipped with the
reason; with ``CHONGMING_REQUIRE_REDIS=1`` a missing server is a failure instead.
Rates per seed: ``benchmarks/kv_teeth.py``, docs/kv-stores.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from chongming_conformance.stress import ScenarioResult, StressProfile, run_scenario

REQUIRE = os.environ.get("CHONGMING_REQUIRE_REDIS") == "1"


def _redis_down() -> str | None:
    """Why Redis cannot be used here, or None."""
    try:
        import redis
    except ImportError:
        return "the 'redis' package is not installed (pip install -e '.[dev]')"
    import kv_stores

    client = redis.Redis.from_url(kv_stores.redis_url(), socket_timeout=2,
                                  socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        return f"no Redis at {kv_stores.redis_url()}: {type(exc).__name__}: {exc}"
    finally:
        client.close()
    return None


@pytest.fixture(scope="module", autouse=True)
def _redis() -> Iterator[None]:
    reason = _redis_down()
    if reason is not None:
        if REQUIRE:
            pytest.fail(f"CHONGMING_REQUIRE_REDIS=1 but {reason}")
        pytest.skip(f"Redis unavailable, KV store tests skipped: {reason}")
    yield


def _profile(seed: int) -> StressProfile:
    """The user's runs: the quick profile, four crashing workers."""
    return StressProfile(name="quick", processes=3, rounds=10, deadline=60.0,
                         crash_cycles=4, seed=seed)


def _run(store: str, seed: int) -> ScenarioResult:
    import kv_stores

    cls = getattr(kv_stores, store)
    with kv_stores.shared_store(cls) as opener:
        return run_scenario("mixed_workload", opener, _profile(seed), keep_logs=False)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_careful_kv_store_passes_the_mixed_workload(seed: int) -> None:
    result = _run("KvTaskStore", seed)
    assert result.verdict == "PASS", result.report()
    assert result.ops > 1000  # the run did real work, not an early exit


#: Each variant and the seeds tried in order until one catches it; the test fails only if
#: every seed misses. Measured rates over seeds 1..20 (benchmarks/kv_teeth.py,
#: docs/kv-stores.md): CreateRaceUndoesWinnerIndex 20/20, IndexAfterRecord 7/20,
#: UnboundedCleanup 6/20 -- 12 seeds leave a miss chance of about 1 %.
#: Not here, because the kit does not catch them often enough to bound: CountsFromStaleIndex
#: (3/20) and GivesUpOnMovedPrune (0/20, and the gate's seed 0 passes it) -- blind spots,
#: reported in docs/kv-stores.md, not failures turned into skips.
TEETH = {
    "CreateRaceUndoesWinnerIndex": list(range(0, 4)),
    "IndexAfterRecord": list(range(0, 12)),
    "UnboundedCleanup": list(range(0, 12)),
}


@pytest.mark.parametrize("store", sorted(TEETH))
def test_each_kv_tooth_is_caught_within_its_seeds(store: str) -> None:
    tried: list[str] = []
    for seed in TEETH[store]:
        result = _run(store, seed)
        if result.failed:
            assert not result.errors, result.report()  # an anomaly, not a run that broke
            assert result.blamed() == ["XP-MIXED-WORKLOAD"], result.report()
            return
        tried.append(f"seed {seed}: {result.verdict}")
    pytest.fail(f"{store} was caught by none of seeds {TEETH[store]}: {'; '.join(tried)}")
