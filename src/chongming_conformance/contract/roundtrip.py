"""Every field survives a round-trip; time is compared as an instant."""

from __future__ import annotations

from datetime import UTC

from ..blame import snapshot_culprit
from ..clauses import checks
from ..model import (
    Progress,
    TaskStatus,
)
from ..samples import (
    KATHMANDU,
    ST_JOHNS,
    at,
    full_snapshot,
    snapshot,
)
from ._base import ContractBase, _diff, expect_on

__all__ = ["RoundTripContract"]


class RoundTripContract(ContractBase):
    """The round-trip and time clauses of ``StoreContract``."""

    # ========================================================================================
    # round-trip and time
    # ========================================================================================
    @checks("SNAPSHOT-FULL-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_snapshot_full_roundtrip__create_get_every_field(self) -> None:
        full = full_snapshot("t-1")
        self.store.create(full)
        got = self._get("t-1")
        expect_on(snapshot_culprit(full, got, "SNAPSHOT-FULL-ROUNDTRIP"), got == full,
                  f"full snapshot changed: {_diff(full, got)}")
        expect_on("SNAPSHOT-FULL-ROUNDTRIP", isinstance(got.tags, frozenset),
                  f"tags came back as {type(got.tags).__name__}")
        expect_on("SNAPSHOT-FULL-ROUNDTRIP", isinstance(got.status, TaskStatus),
                  "status must be a TaskStatus")
        for name in ("created_at", "updated_at", "started_at", "finished_at", "heartbeat_at"):
            value = getattr(got, name)
            expect_on("TIME-UTC-ROUNDTRIP", value.utcoffset() is not None,
                      f"{name} came back naive")
            expect_on("TIME-UTC-ROUNDTRIP",
                      value.microsecond == getattr(full, name).astimezone(UTC).microsecond,
                      f"{name} lost microseconds")

    @checks("SNAPSHOT-FULL-ROUNDTRIP")
    def test_snapshot_full_roundtrip__save_get_every_field(self) -> None:
        self._given(snapshot("t-1", version=1))
        full = full_snapshot("t-1", status_version=2, lease_owner=None, lease_until=None)
        self.store.save(full, expect_version=1)
        self._assert_stored(full, "full snapshot through save()")
        back = snapshot("t-1", version=3)  # every optional field None again
        self.store.save(back, expect_version=2)
        self._assert_stored(back, "None must stay None after save()")

    @checks("SNAPSHOT-FULL-ROUNDTRIP")
    def test_snapshot_full_roundtrip__empty_and_edge_values(self) -> None:
        edge = snapshot(
            "t-1",
            name="",
            version=0,
            tags=frozenset({""}),
            bucket=0,
            pipeline_run_id="",
            progress=Progress(done=0, total=0, message=""),
        )
        plain = snapshot("t-2", created=1)
        self._create_all(edge, plain)
        self._assert_stored(edge, "empty strings, zeros and the empty tag")
        got = self._get("t-2")
        assert got.tags == frozenset() and isinstance(got.tags, frozenset), "no tags"
        assert got.progress is None and got.failure is None, "None must stay None"

    @checks("TIME-INSTANT-ORDER")
    def test_time_instant_order__query_orders_by_instant_not_text(self) -> None:
        # 'east' is earlier as an instant but later as wall-clock text.
        self._given(
            snapshot("west", created_at=at(3600, ST_JOHNS)),
            snapshot("east", created_at=at(1800, KATHMANDU)),
            snapshot("utc", created_at=at(2700)),
        )
        assert self._query_ids() == ["east", "utc", "west"], "query() must order by instant"
        self._given_newest_first()
        assert self._query_ids(newest_first=True) == ["west", "utc", "east"]
