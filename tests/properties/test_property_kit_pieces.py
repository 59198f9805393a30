"""Strategies stay inside their documented domain; profiles resolve as documented;
every kit check declares its clauses."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, Verbosity, given, settings
from hypothesis import core as hypothesis_core
from hypothesis import strategies as st

from chongming_conformance import clauses
from chongming_conformance import strategies as cst
from chongming_conformance.hypothesis_profiles import (
    PROFILES,
    active_settings,
    load_profile,
    profile_name,
)
from chongming_conformance.model import TaskSnapshot
from chongming_conformance.properties import CodecProperties, StoreProperties
from chongming_conformance.stateful import STATE_MACHINE_CLAUSES, StoreStateMachineTests

FAST = settings(max_examples=150, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


def _text_ok(value: str) -> None:
    assert "\x00" not in value
    assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    value.encode("utf-8")  # raises on a lone surrogate


@FAST
@given(cst.texts(max_size=40))
def test_texts_have_no_nul_and_no_surrogate(value: str) -> None:
    _text_ok(value)


@FAST
@given(cst.aware_datetimes())
def test_datetimes_are_aware_in_range_with_fixed_offsets(value: datetime) -> None:
    offset = value.utcoffset()
    assert offset is not None
    assert offset.total_seconds() % 60 == 0
    assert -12 * 3600 <= offset.total_seconds() <= 14 * 3600
    assert datetime(1970, 1, 1, tzinfo=UTC) <= value <= datetime(2201, 1, 1, tzinfo=UTC)


def test_datetimes_reach_the_non_whole_hour_offsets() -> None:
    seen: set[float] = set()

    @settings(max_examples=300, database=None, derandomize=True)
    @given(cst.aware_datetimes())
    def collect(value: datetime) -> None:
        offset = value.utcoffset()
        assert offset is not None
        seen.add(offset.total_seconds() / 3600)

    collect()
    assert {5.75, -3.5, 14.0, -12.0} <= seen


@FAST
@given(cst.version_paths(max_size=8))
def test_version_paths_strictly_increase_within_bigint(path: list[int]) -> None:
    assert len(path) >= 2
    assert all(a < b for a, b in itertools.pairwise(path))
    assert path[0] >= 0 and path[-1] <= cst.INT64_MAX


@FAST
@given(cst.snapshots(full=True))
def test_full_snapshots_set_every_optional_field(snapshot: TaskSnapshot) -> None:
    for name in ("started_at", "finished_at", "bucket", "pipeline_run_id", "progress",
                 "failure", "heartbeat_at", "lease_owner", "lease_until"):
        assert getattr(snapshot, name) is not None, name
    assert snapshot.tags
    assert snapshot.progress is not None and snapshot.progress.total is not None
    assert snapshot.progress.message is not None
    assert snapshot.failure is not None and snapshot.failure.detail is not None
    _text_ok(snapshot.name)


def test_tag_sets_produce_the_prefix_suffix_collisions() -> None:
    seen: set[str] = set()

    @settings(max_examples=300, database=None, derandomize=True)
    @given(cst.tag_sets())
    def collect(tags: frozenset[str]) -> None:
        seen.update(tags)

    collect()
    assert {"io", "ios", "bio", "i", "io,"} <= seen


def test_limits_include_the_boundaries() -> None:
    seen: set[int] = set()

    @settings(max_examples=200, database=None, derandomize=True)
    @given(cst.limits())
    def collect(limit: int) -> None:
        seen.add(limit)

    collect()
    assert {0, 1, cst.INT64_MAX} <= seen


@FAST
@given(cst.snapshot_lists())
def test_snapshot_lists_have_unique_ids(tasks: list[TaskSnapshot]) -> None:
    ids = [t.task_id for t in tasks]
    assert len(ids) == len(set(ids))


@pytest.fixture
def restore_profile() -> Iterator[None]:
    before = settings.get_current_profile_name()
    seed = hypothesis_core.global_force_seed
    yield
    settings.load_profile(before)
    hypothesis_core.global_force_seed = seed


@pytest.mark.usefixtures("restore_profile")
def test_profiles_are_registered_with_the_documented_settings() -> None:
    ci = settings.get_profile(PROFILES["ci"])
    assert ci.derandomize and ci.database is None and ci.deadline is None
    assert HealthCheck.too_slow in ci.suppress_health_check
    for name in PROFILES.values():
        assert settings.get_profile(name).deadline is None
        assert settings.get_profile(name).print_blob
    quick, thorough = settings.get_profile(PROFILES["quick"]), settings.get_profile(
        PROFILES["thorough"])
    assert quick.max_examples < ci.max_examples < thorough.max_examples


@pytest.mark.usefixtures("restore_profile")
def test_load_profile_accepts_short_and_full_names_and_rejects_others() -> None:
    assert load_profile("quick") == settings.get_profile("chongming-quick")
    assert settings.get_current_profile_name() == "chongming-quick"
    assert profile_name("chongming-thorough") == "chongming-thorough"
    with pytest.raises(ValueError, match="quick"):
        profile_name("fast")


@pytest.mark.usefixtures("restore_profile")
def test_active_settings_precedence() -> None:
    hypothesis_core.global_force_seed = None
    settings.load_profile("default")  # nobody chose: the kit default applies
    assert active_settings().max_examples == settings.get_profile(PROFILES["ci"]).max_examples
    assert active_settings().derandomize and active_settings().deadline is None
    settings.register_profile("default-with-verbose-verbosity", verbosity=Verbosity.verbose)
    settings.load_profile("default-with-verbose-verbosity")  # --hypothesis-verbosity alone
    derived = active_settings()
    assert derived.verbosity is Verbosity.verbose
    assert derived.max_examples == settings.get_profile(PROFILES["ci"]).max_examples
    assert derived.deadline is None
    settings.register_profile("someone-elses", max_examples=7)
    settings.load_profile("someone-elses")  # --hypothesis-profile wins
    assert active_settings().max_examples == 7
    load_profile("ci")
    hypothesis_core.global_force_seed = 1234  # --hypothesis-seed beats derandomize
    chosen = active_settings()
    ci = settings.get_profile(PROFILES["ci"])
    assert not chosen.derandomize and chosen.max_examples == ci.max_examples
    assert chosen.database is None


def test_every_kit_check_declares_known_clauses() -> None:
    for cls in (StoreProperties, CodecProperties, StoreStateMachineTests):
        tests = [name for name in dir(cls) if name.startswith("test_")]
        assert tests
        for name in tests:
            ids = clauses.clauses_of(getattr(cls, name))
            assert ids, f"{cls.__name__}.{name} declares no clause"
            assert set(ids) <= set(clauses.CLAUSES)
    assert clauses.clauses_of(StoreStateMachineTests.test_state_machine) == STATE_MACHINE_CLAUSES


def test_strategies_compose_in_user_tests() -> None:
    """The documented usage: an author's own @given test over the kit's strategies."""
    ran: list[int] = []

    @settings(max_examples=5, database=None)
    @given(cst.snapshots(full=True), st.integers(0, 3))
    def authors_test(snapshot: TaskSnapshot, n: int) -> None:
        assert snapshot.evolve(status_version=n).status_version == n
        ran.append(n)

    authors_test()
    assert len(ran) == 5


@pytest.mark.usefixtures("restore_profile")
def test_no_profile_shrinks_unless_asked() -> None:
    """A red run must be about as fast as a green one: shrinking is opt-in."""
    from hypothesis import Phase

    from chongming_conformance import hypothesis_profiles as hp

    for name in hp.PROFILES:
        assert Phase.shrink not in hp.load_profile(name).phases, name
        assert Phase.shrink not in hp.active_settings().phases, name
    try:
        hp.set_shrink(True)
        assert Phase.shrink in hp.active_settings().phases
    finally:
        hp.set_shrink(False)
