"""The codec's own property checks: every value in the strategies' domain survives
``codec``'s row round trip (no store needed).

Split from :mod:`chongming_conformance.checking.properties` (which re-exports
:class:`CodecProperties`), with the two helpers both use: :func:`_run`, which builds the
``@given`` test when the check runs (so the active profile applies), and :func:`_same`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, ClassVar

from hypothesis import given, settings
from hypothesis import strategies as st

from ... import strategies as cst
from ...protocol.clauses import checks
from ...protocol.codec import (
    command_to_row,
    row_to_command,
    row_to_snapshot,
    row_to_transition,
    snapshot_to_row,
    transition_to_row,
)
from ...protocol.model import Command, TaskSnapshot, Transition
from ..hypothesis_profiles import active_settings

__all__ = ["ANY_SNAPSHOT", "CodecProperties"]

#: A snapshot with every optional field set, or a minimal one.
ANY_SNAPSHOT = cst.snapshots(full=True) | cst.snapshots()


def _run(
    test: Callable[..., None], chosen: settings | None, **strategies: st.SearchStrategy[Any]
) -> None:
    """Run ``test`` as a hypothesis test with settings resolved now, not at import."""
    (chosen or active_settings())(given(**strategies)(test))()


def _same(expected: object, actual: object, what: str) -> None:
    assert actual == expected, f"{what}:\n  expected {expected!r}\n  got      {actual!r}"


class CodecProperties:
    """The kit's codec round-trips every value in the strategies' domain (no store needed)."""

    hypothesis_settings: ClassVar[settings | None] = None

    @checks("SNAPSHOT-FULL-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_snapshot_codec_roundtrip(self) -> None:
        def prop(snapshot: TaskSnapshot) -> None:
            _same(snapshot, row_to_snapshot(snapshot_to_row(snapshot)), "codec round-trip")

        _run(prop, self.hypothesis_settings, snapshot=ANY_SNAPSHOT)

    @checks("TRANSITION-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_transition_codec_roundtrip(self) -> None:
        def prop(transition: Transition) -> None:
            got = row_to_transition(transition_to_row(transition))
            _same(transition, got, "codec round-trip")

        _run(prop, self.hypothesis_settings, transition=cst.transitions() | cst.transitions(
            full=True))

    @checks("COMMAND-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_command_codec_roundtrip(self) -> None:
        def prop(command: Command, lease: datetime | None) -> None:
            command = replace(command, lease_until=lease)
            _same(command, row_to_command(command_to_row(command)), "codec round-trip")

        _run(
            prop,
            self.hypothesis_settings,
            command=cst.commands(full=True) | cst.commands(),
            lease=st.none() | cst.aware_datetimes(),
        )
