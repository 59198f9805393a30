"""The command queue: submit, claim under a lease, complete, release."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from ...oracle import lease_culprit
from ...oracle.assertions import expect_raises as _raises
from ...oracle.blame import blamed, record_culprit
from ...oracle.confirm import claim_order_follows_wall_clock, decide
from ...protocol.alphabet import describe
from ...protocol.clauses import checks
from ...protocol.errors import StoreError
from ...protocol.model import (
    Command,
    CommandKind,
)
from ...strategies.samples import (
    KATHMANDU,
    ST_JOHNS,
    at,
    command,
    confusable_id_twins,
    full_command,
)
from ._base import LEASE, LIMIT_ZERO_REFUSALS, ContractBase, _cmd_ids, _diff, expect_on

__all__ = ["CommandContract"]


def _takes_from(got: Command, impostor: Command, original: Command) -> bool:
    """Does ``got`` hold any of ``impostor``'s values where it differs from ``original``?"""
    return any(
        getattr(got, f) == getattr(impostor, f)
        for f in ("task_id", "kind", "issued_by", "created_at", "outcome")
        if getattr(got, f) != getattr(original, f)
    )


def _expect(ok: bool, message: str) -> None:
    assert ok, message


def _never_submitted(method: str, call: Callable[[], object]) -> None:
    """``call`` completes or releases a command id that was never submitted. The original
    guide says what both do to a command, not to an id it never held, and the controller only
    finishes commands it claimed: the store may do nothing or raise StoreError. Anything else
    (a KeyError from a dict, a driver error) fails the calling test."""
    try:
        call()
    except StoreError:
        return
    except Exception as exc:
        raise AssertionError(
            f"{method}() of a command id never submitted raised {type(exc).__name__}: {exc}; "
            "it may do nothing or raise StoreError"
        ) from exc


class CommandContract(ContractBase):
    """The command-queue clauses of ``StoreContract``."""

    # ========================================================================================
    # commands
    # ========================================================================================
    @checks("SUBMIT-THEN-CLAIM")
    def test_submit_then_claim__leased_copy_returned(self) -> None:
        c = command("c-1", "t-1")
        self.store.submit_command(c)
        now = at(100)
        got = list(self._claim(now=now, lease_seconds=LEASE))
        expected = replace(c, lease_until=now + timedelta(seconds=LEASE))
        if [c.command_id for c in got] == ["c-1"] and got[0].lease_until is not None:
            # The right command, leased: any other difference is its round trip's failure.
            expect_on(record_culprit(expected, got[0], "COMMAND-ROUNDTRIP"),
                      got[0] == expected, f"the claimed command changed: {_diff(expected, got[0])}")
        assert got == [expected], f"claim_commands() returned {got}"
        assert got[0].finished_at is None, "a claimed command is not finished"

    @checks("COMMAND-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_command_roundtrip__every_field(self) -> None:
        c = full_command("c-1", "t-1")
        self.store.submit_command(c)
        now = at(50, KATHMANDU)
        got = list(self._claim(now=now, lease_seconds=12.5))
        expect_on("SUBMIT-THEN-CLAIM", len(got) == 1, f"expected the command back, got {got}")
        want = replace(c, lease_until=now + timedelta(seconds=12.5))
        # The lease is the claim's to set (SUBMIT-THEN-CLAIM, or TIME-INSTANT-ORDER when it
        # is counted from the wall clock); every other field is this clause's.
        expect_on(lease_culprit(now, 12.5, got[0].lease_until),
                  got[0].lease_until == want.lease_until,
                  f"lease_until: {_diff(want, got[0])}")
        expect_on(record_culprit(want, got[0], "COMMAND-ROUNDTRIP"), got[0] == want,
                  _diff(want, got[0]))
        expect_on("COMMAND-ROUNDTRIP", isinstance(got[0].kind, CommandKind),
                  "kind must be a CommandKind")
        expect_on("TIME-UTC-ROUNDTRIP", got[0].created_at.utcoffset() is not None,
                  "naive created_at")

    @checks("COMMAND-ROUNDTRIP")
    def test_command_roundtrip__adversarial_ids_and_text(self) -> None:
        values = self._adversarial_values()
        sent = [
            replace(command(value, value, issued_by=value), created_at=at(i))
            for i, value in enumerate(values)
        ]
        for c in sent:
            self.store.submit_command(c)
        now = at(1000)
        got = {c.command_id: c for c in self._claim(
            now=now, lease_seconds=LEASE, limit=len(sent) + 1)}
        for c in sent:
            back = got.get(c.command_id)
            expected = replace(c, lease_until=now + timedelta(seconds=LEASE))
            assert back == expected, (
                f"command {describe(c.command_id)} did not come back intact: "
                + (_diff(expected, back) if back is not None else
                   f"not claimed; claimed ids: {[describe(i) for i in got]}")
            )

    @checks("SUBMIT-DUPLICATE-RAISES")
    def test_submit_duplicate_raises__conflict_leaves_original(self) -> None:
        original = command("c-1", "t-1", kind=CommandKind.STOP, issued_by="first")
        self.store.submit_command(original)
        impostor = command("c-1", "t-2", kind=CommandKind.RETRY, issued_by="second", created=5)
        _raises(StoreError, lambda: self.store.submit_command(impostor), "duplicate command_id")
        now = at(10)
        got = list(self._claim(now=now, lease_seconds=LEASE))
        want = [replace(original, lease_until=now + timedelta(seconds=LEASE))]
        if len(got) == 1 and got != want and not _takes_from(got[0], impostor, want[0]):
            # Changed, but to nothing the refused submit carried: a round-trip failure.
            expect_on("COMMAND-ROUNDTRIP", False,
                      f"the stored command changed: {_diff(want[0], got[0])}")
        assert got == want, f"a refused submit changed the stored command: {got}"

    @checks("CLAIM-EXPIRED-RECLAIM")
    def test_claim_expired_reclaim__completing_one_id_leaves_look_alikes(self) -> None:
        """complete_command() finishes the command it names, by exact id: a command whose id
        a LIKE pattern, a case-insensitive collation or a prefix confuses with it is still
        unfinished, so it is claimable again once its lease ends. (One command per task,
        each task its own.)"""
        pairs = confusable_id_twins()
        targets = list(dict.fromkeys(t for t, _ in pairs))
        twins = [w for _, w in pairs]
        for i, command_id in enumerate([*targets, *twins]):
            self.store.submit_command(command(command_id, f"task-{i:02d}", created=i))
        first = self._claim(now=at(0), lease_seconds=LEASE, limit=1000)
        assert sorted(_cmd_ids(first)) == sorted([*targets, *twins]), (
            f"the first claim took {len(first)} of {len(targets) + len(twins)} commands")
        for command_id in targets:
            self.store.complete_command(command_id, now=at(1), outcome="stopped")
        again = set(_cmd_ids(self._claim(now=at(LEASE + 10), lease_seconds=LEASE, limit=1000)))
        back = sorted(describe(t) for t in targets if t in again)
        expect_on("COMPLETE-NEVER-RECLAIMED", not back,
                  f"completed command(s) {', '.join(back)} were claimed again")
        lost = sorted(describe(w) for w in twins if w not in again)
        assert not lost, (
            f"command(s) {', '.join(lost)}, never completed, were not claimable after their "
            "lease ended: completing a look-alike id finished them too (complete_command must "
            "match its id exactly: no LIKE, case-insensitive collation or prefix)")

    @checks("CLAIM-LEASE-EXCLUSIVE")
    def test_claim_lease_exclusive__conflict_leased_command_not_reclaimed(self) -> None:
        self.store.submit_command(command("c-1"))
        first = self._claim(now=at(0), lease_seconds=LEASE)
        assert _cmd_ids(first) == ["c-1"], "the first claim"
        for when in (0, 1, 15, 29.999999):
            again = self._claim(now=at(when), lease_seconds=LEASE)
            assert list(again) == [], f"claimed again at +{when}s inside the lease: {again}"
        # The refused claims must not have extended the lease (to +59.99 s): it ended at
        # +30 s. Asked at +31 s, not at +30 s exactly: the boundary is CLAIM-LEASE-BOUNDARY's.
        after = self._claim(now=at(31), lease_seconds=LEASE)
        # Not claimable after the lease ended: refused claims moved the lease, or leases
        # never end -- seen from outside, the expiry failed.
        expect_on("CLAIM-EXPIRED-RECLAIM", _cmd_ids(after) == ["c-1"],
                  "not claimable after its lease ended (did a refused claim move the lease?)")

    @checks("TIME-INSTANT-ORDER")
    def test_time_instant_order__lease_end_compared_as_an_instant(self) -> None:
        self.store.submit_command(command("c-1"))
        assert _cmd_ids(self._claim(now=at(0), lease_seconds=LEASE)) == ["c-1"]
        # Zones chosen so a wall-clock comparison gets both answers wrong: just before
        # the instant reads *later* in Kathmandu, just after it reads *earlier* in St John's.
        # (Exactly at lease_until is CLAIM-LEASE-BOUNDARY's question, a SHOULD: not here.)
        utc_early = self._claim(now=at(LEASE - 0.000001), lease_seconds=LEASE)
        blamed(("CLAIM-LEASE-EXCLUSIVE",), lambda: _expect(
            utc_early == [], "claimable a microsecond before lease_until (now in UTC)"))
        early = self._claim(now=at(LEASE - 0.000001, KATHMANDU), lease_seconds=LEASE)
        assert early == [], "claimable a microsecond before lease_until (now in UTC+05:45)"
        late = self._claim(now=at(LEASE + 0.000001, ST_JOHNS), lease_seconds=LEASE)
        if _cmd_ids(late) != ["c-1"]:
            utc_late = self._claim(now=at(LEASE + 10), lease_seconds=LEASE)
            expect_on("CLAIM-EXPIRED-RECLAIM", _cmd_ids(utc_late) == ["c-1"],
                      "not claimable after lease_until, even 10 s after it (now in UTC)")
        assert _cmd_ids(late) == ["c-1"], (
            "not claimable a microsecond after lease_until (now in UTC-03:30)")

    @checks("CLAIM-LEASE-BOUNDARY")
    def test_claim_lease_boundary__free_exactly_at_lease_until(self) -> None:
        """A SHOULD: the original guide says "no lease, or an expired lease" without fixing
        the instant, so a store that still holds the lease at now == lease_until conforms
        to every MUST clause; the kit recommends [claim time, lease_until)."""
        self.store.submit_command(command("c-1"))
        assert _cmd_ids(self._claim(now=at(0), lease_seconds=LEASE)) == ["c-1"]
        got = self._claim(now=at(LEASE), lease_seconds=LEASE)
        if _cmd_ids(got) != ["c-1"]:
            later = self._claim(now=at(LEASE + 10), lease_seconds=LEASE)
            blamed(("CLAIM-EXPIRED-RECLAIM",), lambda: _expect(
                _cmd_ids(later) == ["c-1"],
                "not claimable at lease_until, nor 10 s after it: leases never end"))
        assert _cmd_ids(got) == ["c-1"], "not claimable at now == lease_until"

    @checks("CLAIM-LEASE-PRECISE")
    def test_claim_lease_precise__fractional_seconds(self) -> None:
        """Leases of 1.5 s and 0.25 s last exactly that: not a whole-second TTL (Redis
        ``EX``), not an interval rounded to seconds.

        Two preconditions first, blamed on their own clauses: a lease holds at all (a
        store that ignores leases is CLAIM-LEASE-EXCLUSIVE's), and an expired one comes
        back (a store where leases never end is CLAIM-EXPIRED-RECLAIM's).
        """
        self.store.submit_command(command("c-held", "t-held"))
        self._claim(now=at(0), lease_seconds=1.5)
        blamed(("CLAIM-LEASE-EXCLUSIVE",), lambda: _expect(
            self._claim(now=at(0.5), lease_seconds=1.5) == [],
            "precondition: claimable again 0.5 s into a 1.5 s lease"))
        blamed(("CLAIM-EXPIRED-RECLAIM",), lambda: _expect(
            _cmd_ids(self._claim(now=at(30), lease_seconds=1.5)) == ["c-held"],
            "precondition: not claimable 28 s after a 1.5 s lease ended"))
        for n, (lease, inside) in enumerate(((1.5, 1.2), (0.25, 0.2))):
            # Only membership counts below: commands of earlier rounds may come back too.
            cid, t0 = f"c-{n}", 100.0 * (n + 1)
            self.store.submit_command(command(cid, f"t-{n}", created=-10 + n))
            claimed = self._claim(now=at(t0), lease_seconds=lease)
            assert cid in _cmd_ids(claimed), f"the first claim of {cid}"
            again = self._claim(now=at(t0 + inside), lease_seconds=lease)
            assert cid not in _cmd_ids(again), (
                f"claimed again {inside} s into a {lease} s lease: the lease was cut to whole "
                "seconds")
            after = self._claim(now=at(t0 + lease + 0.000001), lease_seconds=lease)
            assert cid in _cmd_ids(after), (
                f"not claimable a microsecond after a {lease} s lease ended: the lease was "
                "rounded up")

    @checks("CLAIM-EXPIRED-RECLAIM")
    def test_claim_expired_reclaim__new_lease_after_expiry(self) -> None:
        self.store.submit_command(command("c-1"))
        self._claim(now=at(0), lease_seconds=LEASE)
        again = list(self._claim(now=at(45), lease_seconds=LEASE))
        assert _cmd_ids(again) == ["c-1"], "an expired lease must be claimable"
        assert again[0].lease_until == at(45 + LEASE), "the re-claim sets a new lease"
        blamed(("CLAIM-LEASE-EXCLUSIVE",), lambda: _expect(
            not self._claim(now=at(60), lease_seconds=LEASE), "the new lease must hold"))

    @checks("CLAIM-ORDER", "TIME-INSTANT-ORDER")
    def test_claim_order__oldest_first_by_instant(self) -> None:
        """One command per task, each its own (the order is across tasks, and a store
        keeping one command per task would otherwise be left with the last one written)."""
        # Wall-clock text order differs from instant order across these offsets.
        self.store.submit_command(replace(command("c-late", "t-late"),
                                          created_at=at(120, ST_JOHNS)))
        self.store.submit_command(replace(command("c-early", "t-early"),
                                          created_at=at(60, KATHMANDU)))
        self.store.submit_command(replace(command("c-mid", "t-mid"), created_at=at(90)))
        one = self._claim(now=at(200), lease_seconds=LEASE, limit=1)
        sent = {"c-late": at(120, ST_JOHNS), "c-early": at(60, KATHMANDU), "c-mid": at(90)}
        for c in one:  # a time that does not survive the round trip explains any order
            expect_on(record_culprit(replace(c, created_at=sent[c.command_id]), c,
                                     "COMMAND-ROUNDTRIP"),
                      c.created_at == sent.get(c.command_id, c.created_at),
                      f"created_at of {c.command_id!r} changed on its way back")
        if _cmd_ids(one) != ["c-early"]:
            # The wall-clock oldest is c-late: a fresh store says whether that is why.
            created = [at(120, ST_JOHNS), at(60, KATHMANDU), at(90)]
            expect_on(decide(claim_order_follows_wall_clock(created), "TIME-INSTANT-ORDER",
                             "CLAIM-ORDER"), False,
                      f"limit=1 must take the oldest: {_cmd_ids(one)}")
        rest = self._claim(now=at(200), lease_seconds=LEASE)
        # Which commands a claim takes is fixed; the order of the list it returns is not.
        assert sorted(_cmd_ids(rest)) == ["c-late", "c-mid"], f"the rest: {_cmd_ids(rest)}"

    @checks("CLAIM-LIMIT")
    def test_claim_limit__only_limit_are_leased(self) -> None:
        for i in range(5):  # one command per task, each its own
            self.store.submit_command(command(f"c-{i}", f"t-{i}", created=i))
        first = self._claim(now=at(10), lease_seconds=LEASE, limit=2)
        assert len(first) == 2, f"limit=2 returned {_cmd_ids(first)}"
        expect_on("CLAIM-ORDER", sorted(_cmd_ids(first)) == ["c-0", "c-1"],
                  f"limit=2 did not take the two oldest: {_cmd_ids(first)}")
        rest = self._claim(now=at(10), lease_seconds=LEASE, limit=50)
        again = sorted(set(_cmd_ids(rest)) & {"c-0", "c-1"})
        blamed(("CLAIM-LEASE-EXCLUSIVE",), lambda: _expect(
            not again, f"{again} claimed again inside the lease the first claim gave them"))
        assert sorted(_cmd_ids(rest)) == ["c-2", "c-3", "c-4"], (
            f"commands beyond the limit were leased: the rest is {_cmd_ids(rest)}")

    @checks("CLAIM-LIMIT")
    def test_claim_limit__zero_leases_nothing(self) -> None:
        """``limit=0``: the controller never passes it, and the original guide does not say
        what it means, so a store may refuse it (StoreError or ValueError) or answer an empty
        sequence. Either way it leases nothing: the next claim takes the command."""
        self.store.submit_command(command("c-0"))
        try:
            zero = self._claim(now=at(1), lease_seconds=LEASE, limit=0)
        except LIMIT_ZERO_REFUSALS:
            zero = []
        assert zero == [], f"limit=0 returned {_cmd_ids(zero)}"
        got = self._claim(now=at(1), lease_seconds=LEASE)
        assert _cmd_ids(got) == ["c-0"], "limit=0 leased the command"

    @checks("COMPLETE-NEVER-RECLAIMED")
    def test_complete_never_reclaimed__claimed_then_completed(self) -> None:
        self.store.submit_command(command("c-1", "t-1"))
        self.store.submit_command(command("c-2", "t-2", created=1))
        self._claim(now=at(0), lease_seconds=LEASE)
        self.store.complete_command("c-1", now=at(1), outcome="stopped")
        for when in (31, 3600, 10**6):
            got = self._claim(now=at(when), lease_seconds=LEASE)
            assert "c-1" not in _cmd_ids(got), f"a completed command was claimed at +{when}s"

    @checks("COMPLETE-NEVER-RECLAIMED")
    def test_complete_never_reclaimed__completed_without_claim(self) -> None:
        self.store.submit_command(command("c-1"))
        self.store.complete_command("c-1", now=at(1), outcome="already-terminal")
        assert list(self._claim(now=at(2), lease_seconds=LEASE)) == []

    def _completed_stays_out(self, claimed: list[Command], command_id: str) -> None:
        """Precondition: a command just completed is not handed out again; if it is, the
        failure is COMPLETE-NEVER-RECLAIMED's, not the calling test's."""
        blamed(("COMPLETE-NEVER-RECLAIMED",), lambda: _expect(
            command_id not in _cmd_ids(claimed),
            f"precondition: {command_id!r} was claimed right after complete_command()",
        ))

    @checks("COMPLETE-IDEMPOTENT")
    def test_complete_idempotent__twice_and_unknown(self) -> None:
        self.store.submit_command(command("c-1", "t-1"))
        self.store.submit_command(command("c-2", "t-2", created=1))
        self.store.complete_command("c-1", now=at(1), outcome="stopped")
        self._completed_stays_out(self._claim(now=at(2), lease_seconds=LEASE), "c-1")
        self.store.complete_command("c-1", now=at(3), outcome="again")
        _never_submitted("complete_command", lambda: self.store.complete_command("nope", now=at(3)))
        got = self._claim(now=at(3 + LEASE), lease_seconds=LEASE)  # c-2's lease has ended
        expect_on("CLAIM-EXPIRED-RECLAIM", "c-2" in _cmd_ids(got),
                  f"c-2 was not claimable after its lease ended: {_cmd_ids(got)}")
        assert _cmd_ids(got) == ["c-2"], (
            f"after a second complete() and one of an unknown id: {_cmd_ids(got)}"
        )

    @checks("RELEASE-NOT-COMPLETE")
    def test_release_not_complete__claimable_at_once(self) -> None:
        self.store.submit_command(command("c-1"))
        self._claim(now=at(0), lease_seconds=LEASE)
        self.store.release_command("c-1", now=at(1))
        got = list(self._claim(now=at(1), lease_seconds=LEASE))
        assert _cmd_ids(got) == ["c-1"], "a released command must be claimable immediately"
        assert got[0].finished_at is None, "release must not finish the command"
        assert got[0].lease_until == at(1 + LEASE)

    @checks("RELEASE-FINISHED-NOOP")
    def test_release_finished_noop__completed_stays_completed(self) -> None:
        self.store.submit_command(command("c-1"))
        self._claim(now=at(0), lease_seconds=LEASE)
        self.store.complete_command("c-1", now=at(1))
        # Past the claim's lease: only completion keeps it out now (inside the lease, the
        # lease alone would, and a complete that did nothing went unseen).
        self._completed_stays_out(self._claim(now=at(LEASE + 1), lease_seconds=LEASE), "c-1")
        self.store.release_command("c-1", now=at(LEASE + 2))
        _never_submitted("release_command",
                         lambda: self.store.release_command("nope", now=at(LEASE + 2)))
        assert list(self._claim(now=at(LEASE + 3), lease_seconds=LEASE)) == [], (
            "releasing a completed command made it claimable"
        )

    @checks("RELEASE-NOT-COMPLETE")
    def test_release_not_complete__unclaimed_command_stays_claimable(self) -> None:
        # Releasing a never-claimed, unfinished command must not finish it (a release
        # done as complete drops it); it is no finished command, so not FINISHED-NOOP.
        self.store.submit_command(command("c-1"))
        self.store.release_command("c-1", now=at(0))
        assert _cmd_ids(self._claim(now=at(0), lease_seconds=LEASE)) == ["c-1"]
