"""touch(): unversioned heartbeat, progress and lease updates."""

from __future__ import annotations

from typing import Any

from ...oracle.blame import blame, touch_culprit
from ...protocol.clauses import checks
from ...protocol.model import (
    Progress,
    TaskSnapshot,
    TaskStatus,
)
from ...strategies.samples import (
    KATHMANDU,
    at,
    full_snapshot,
    snapshot,
)
from ._base import ContractBase, _diff

__all__ = ["TouchContract"]


class TouchContract(ContractBase):
    """The touch clauses of ``StoreContract``."""

    # ========================================================================================
    # touch
    # ========================================================================================
    @checks("TOUCH-NO-VERSION")
    def test_touch_no_version__version_unchanged_and_save_still_matches(self) -> None:
        self._given(snapshot("t-1", version=3, status=TaskStatus.RUNNING))
        for i in range(5):
            self.store.touch("t-1", progress=Progress(done=i), heartbeat_at=at(i))
        self.store.touch("t-1", lease_owner="sup", lease_until=at(90))
        assert self._get("t-1").status_version == 3, "touch() changed status_version"
        nxt = snapshot("t-1", version=4, status=TaskStatus.SUCCEEDED)
        self.store.save(nxt, expect_version=3)  # must not conflict because of the touches
        assert self._get("t-1").status_version == 4

    @checks("TOUCH-ONLY-NAMED-FIELDS")
    def test_touch_only_named_fields__each_argument_alone(self) -> None:
        original = full_snapshot("t-1")
        self._given(original)
        self.store.touch("t-1")
        self._assert_touched(original, {}, "touch() with every argument None must change nothing")
        expected = original
        p = Progress(done=99, total=None, message=None)
        steps: list[dict[str, Any]] = [
            {"progress": p},
            {"heartbeat_at": at(500)},
            {"lease_owner": "other"},
            {"lease_until": at(900)},
        ]
        for named in steps:
            self.store.touch("t-1", **named)
            expected = expected.evolve(**named)
            self._assert_touched(expected, named, f"touch({', '.join(named)}=...) alone")

    def _assert_touched(self, expected: TaskSnapshot, named: dict[str, Any], why: str) -> None:
        """The task as ``expected``; a difference is blamed on the touch clause it shows."""
        actual = self.store.get(expected.task_id)
        if actual == expected:
            return
        exc = AssertionError(f"{why}: {_diff(expected, actual)}")
        blame(exc, (touch_culprit(expected, actual, named),))
        raise exc

    @checks("TOUCH-MISSING-IGNORED")
    def test_touch_missing_ignored__no_error_no_row(self) -> None:
        self.store.touch(
            "ghost",
            progress=Progress(done=1),
            heartbeat_at=at(1),
            lease_owner="sup",
            lease_until=at(30),
        )
        self.store.touch("ghost")
        assert self._absent("ghost"), "touch() of a missing task created it"
        assert self._all_tasks() == [], "touch() of a missing task added a row"

    @checks("TOUCH-LEASE")
    def test_touch_lease__stored_and_renewed(self) -> None:
        self._given(snapshot("t-1"))
        got = self._touch("t-1", lease_owner="sup-1", lease_until=at(30, KATHMANDU))
        assert (got.lease_owner, got.lease_until) == ("sup-1", at(30)), "touch() lease"
        got = self._touch("t-1", lease_until=at(60))  # renewal by the same owner
        assert (got.lease_owner, got.lease_until) == ("sup-1", at(60)), "lease renewal"

    @checks("TOUCH-SIGNALS-SEPARATE")
    def test_touch_signals_separate__heartbeat_and_lease_independent(self) -> None:
        self._given(snapshot("t-1"))
        self.store.touch("t-1", heartbeat_at=at(10))
        got = self._get("t-1")
        assert got.heartbeat_at == at(10), "heartbeat_at not stored verbatim"
        assert (got.lease_owner, got.lease_until) == (None, None), "a heartbeat created a lease"
        self._given_touched("t-1", lease_owner="sup", lease_until=at(40))
        got = self._get("t-1")
        assert got.heartbeat_at == at(10), "renewing the lease moved the heartbeat"
        self.store.touch("t-1", heartbeat_at=at(11))
        got = self._get("t-1")
        assert got.lease_until == at(40), "a heartbeat moved the lease"
        assert got.heartbeat_at == at(11)
