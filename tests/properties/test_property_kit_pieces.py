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

from chongming_conformance import strategies as cst
from chongming_conformance.checking.hypothesis_profiles import (
    PROFILES,
    active_settings,
    load_profile,
    profile_name,
)
from chongming_conformance.checking.properties import CodecProperties, StoreProperties
from chongming_conformance.checking.stateful import STATE_MACHINE_CLAUSES, StoreStateMachineTests
from chongming_conformance.oracle import check_query
from chongming_conformance.protocol import alphabet, clauses
from chongming_conformance.protocol.model import TaskQuery, TaskSnapshot
from chongming_conformance.strategies import samples

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


def test_limits_include_the_boundaries_but_never_zero() -> None:
    """limit=0 is left open by the guide (a store may refuse it): never generated."""
    seen: set[int] = set()

    @settings(max_examples=200, database=None, derandomize=True)
    @given(cst.limits())
    def collect(limit: int) -> None:
        seen.add(limit)

    collect()
    assert {1, cst.INT64_MAX} <= seen
    assert min(seen) == 1


def test_queries_aimed_at_tasks_never_ask_for_limit_zero() -> None:
    tasks = [samples.snapshot(f"t{i}", created=i, name=f"n{i % 2}") for i in range(4)]
    seen: set[int | None] = set()

    @settings(max_examples=200, database=None, derandomize=True)
    @given(cst.queries_for(tasks) | cst.queries())
    def collect(q: TaskQuery) -> None:
        seen.add(q.limit)

    collect()
    assert 0 not in seen and 1 in seen and None in seen


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

    from chongming_conformance.checking import hypothesis_profiles as hp

    for name in hp.PROFILES:
        assert Phase.shrink not in hp.load_profile(name).phases, name
        assert Phase.shrink not in hp.active_settings().phases, name
    try:
        hp.set_shrink(True)
        assert Phase.shrink in hp.active_settings().phases
    finally:
        hp.set_shrink(False)


# -- the adversarial alphabet: every class, in the strategies and in the fixed samples ---------
def _collect(strategy: st.SearchStrategy[object], examples: int = 300) -> list[object]:
    seen: list[object] = []

    @settings(max_examples=examples, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(strategy)
    def collect(value: object) -> None:
        seen.append(value)

    collect()
    return seen


def test_the_alphabet_has_every_class() -> None:
    assert set(alphabet.C0_CONTROLS) == {chr(c) for c in range(1, 0x20)}
    escaped = set(alphabet.ESCAPED_CHARACTERS)
    assert alphabet.NUL not in escaped, "NUL is outside the text domain"
    for ch in ("\x7f", "\u2028", "\u2029", "\u0301", "\\", '"', " ", "\U0001f600"):
        assert ch in escaped, repr(ch)
    reasons = " ".join(why for _, _, why in alphabet.CONFUSABLE_PAIRS)
    for word in ("PAD SPACE", "case", "NFC", "full-width", "Turkish", "leading"):
        assert word in reasons, word
    lefts = {left for left, _, _ in alphabet.CONFUSABLE_PAIRS}
    assert all(left != right and right not in lefts
               for left, right, _ in alphabet.CONFUSABLE_PAIRS)


def test_texts_draw_every_character_of_the_alphabet() -> None:
    drawn = set("".join(str(v) for v in _collect(cst.texts(max_size=40), 1000)))
    missing = [f"U+{ord(ch):04X}" for ch in alphabet.ESCAPED_CHARACTERS if ch not in drawn]
    assert not missing, f"texts() never drew {missing}"
    assert alphabet.NUL not in drawn


def test_texts_draw_nul_only_when_asked() -> None:
    drawn = set("".join(str(v) for v in _collect(cst.texts(max_size=40, nul=True))))
    assert alphabet.NUL in drawn


def test_the_adversarial_pool_holds_every_confusable_pair_and_controls() -> None:
    pairs = {text for left, right, _ in alphabet.CONFUSABLE_PAIRS for text in (left, right)}
    assert pairs <= set(cst.ADVERSARIAL_POOL)
    assert any(ch in alphabet.C0_CONTROLS for value in cst.ADVERSARIAL_POOL for ch in value)
    names = {str(v) for v in _collect(cst.names(), 300)}
    tags = {str(v) for v in _collect(cst.tags(), 300)}
    for drawn in (names, tags):
        assert {"build", "build ", "STRASSE", "io\x0b"} <= drawn


def test_fixed_samples_cover_the_whole_alphabet() -> None:
    values = samples.adversarial_values()
    assert len(values) == len(set(values)) and len(values) < 40, "few, distinct values"
    held = set("".join(values))
    assert set(alphabet.ESCAPED_CHARACTERS) <= held
    for left, right, _ in alphabet.CONFUSABLE_PAIRS:
        assert left in values and right in values
    assert alphabet.NUL not in held
    with_nul = samples.adversarial_values(include_nul=True)
    assert "build\x00" in with_nul and set(values) < set(with_nul)
    assert set(alphabet.ESCAPED_CHARACTERS) <= set(samples.ADVERSARIAL_TEXT)


def test_describe_names_what_a_terminal_hides() -> None:
    assert alphabet.describe("build") == "'build'"
    assert alphabet.describe("build ") == "'build ' (U+0020 SPACE)"
    assert "U+000B VT" in alphabet.describe("a\x0bb")
    assert "U+0301 COMBINING ACUTE ACCENT" in alphabet.describe("cafe\u0301")


def test_the_oracle_words_a_wrong_query_with_the_values() -> None:
    stored = [samples.snapshot("t-0", name="build"),
              samples.snapshot("t-4", name="build ", created=4),
              samples.snapshot("t-5", tags=frozenset({"io"}), created=5)]
    with pytest.raises(AssertionError) as wrong:
        check_query(stored[:2], stored, TaskQuery(name="build"))
    assert "wrongly included: 't-4' name='build ' (U+0020 SPACE)" in str(wrong.value)
    with pytest.raises(AssertionError) as missing:
        check_query([], stored, TaskQuery(tag="io"))
    assert "missing:          't-5' tags={'io'}" in str(missing.value)
