"""What a store declares about itself: unsupported capabilities and known deviations.

A store states its limits instead of forking the suite. The declaration is a
plain mapping named ``CHONGMING_CAPABILITIES``, looked up first on the factory
object (``make_store.CHONGMING_CAPABILITIES = {...}``) and then on the module
that defines it, so one module can hold several factories with different
declarations::

    CHONGMING_CAPABILITIES = {
        "unsupported": {"cross_process": "one JSON file, no lock: single process only"},
        "deviations": {"QUERY-TAG-EXACT": "legacy LIKE matching, fixed in 2.0"},
    }

* ``unsupported`` maps a capability name (see :data:`CAPABILITIES`) to a reason;
  every clause that needs it is reported UNSUPPORTED (never PASS) and its tests
  do not run.
* ``deviations`` maps a clause ID to a reason; the tests checking it run as
  strict expected failures, so a deviation that is fixed makes the run fail
  until the declaration is removed.

Unknown keys, capability names or clause IDs are errors (the plugin turns them
into usage errors) so a typo cannot silently excuse anything.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .clauses import CLAUSES, Scope

__all__ = [
    "ATTRIBUTE",
    "CAPABILITIES",
    "Capabilities",
    "CapabilityError",
    "declared_capabilities",
    "parse_capabilities",
]

#: Name of the attribute a factory or its module uses to declare capabilities.
ATTRIBUTE = "CHONGMING_CAPABILITIES"

#: Capability name -> what needs it: a clause scope (every clause of it), or the ids of the
#: clauses that need it. ``network``: the store talks to a server over TCP, so network faults
#: (resets, blackholes) can reach it; a store on a local file or in memory declares it
#: unsupported and its network fault clauses are UNSUPPORTED (the pauses still judge
#: XP-FAULT-SAFETY).
CAPABILITIES: Mapping[str, Scope | frozenset[str]] = MappingProxyType({
    "cross_process": Scope.CROSS_PROCESS,
    "network": frozenset({"XP-FAULT-RECOVERY", "XP-FAULT-NO-HANG"}),
})

_SECTIONS = ("unsupported", "deviations")


class CapabilityError(ValueError):
    """The declaration is malformed or names something unknown."""


@dataclass(frozen=True)
class Capabilities:
    """A validated declaration (empty when the store declares nothing)."""

    unsupported: Mapping[str, str] = field(default_factory=dict)
    deviations: Mapping[str, str] = field(default_factory=dict)
    origin: str | None = None

    def unsupported_clauses(self) -> dict[str, str]:
        """Clause ID -> reason, for every clause needing an unsupported capability."""
        out: dict[str, str] = {}
        for name, reason in self.unsupported.items():
            needs = CAPABILITIES[name]
            for clause in CLAUSES.values():
                if clause.scope is needs if isinstance(needs, Scope) else clause.id in needs:
                    out[clause.id] = f"{name} unsupported: {reason}"
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "unsupported": dict(self.unsupported),
            "deviations": dict(self.deviations),
        }


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def _reasons(raw: object, section: str, origin: str) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        raise CapabilityError(
            f"{origin}[{section!r}] must be a mapping of name to reason, "
            f"not {type(raw).__name__}"
        )
    out: dict[str, str] = {}
    for key, reason in raw.items():
        if not isinstance(key, str) or not isinstance(reason, str) or not reason.strip():
            raise CapabilityError(
                f"{origin}[{section!r}] entry {key!r} needs a non-empty reason string, "
                f"got {reason!r}"
            )
        out[key] = reason.strip()
    return out


def parse_capabilities(raw: object, origin: str) -> Capabilities:
    """Validate a raw declaration; ``origin`` names it in error messages."""
    if raw is None:
        return Capabilities(origin=None)
    if not isinstance(raw, Mapping):
        raise CapabilityError(f"{origin} must be a mapping, not {type(raw).__name__}")
    for key in raw:
        if key not in _SECTIONS:
            raise CapabilityError(
                f"{origin} has unknown key {key!r}{_suggest(str(key), list(_SECTIONS))}; "
                f"allowed keys are {', '.join(_SECTIONS)}"
            )
    unsupported = _reasons(raw.get("unsupported", {}), "unsupported", origin)
    deviations = _reasons(raw.get("deviations", {}), "deviations", origin)
    for name in unsupported:
        if name not in CAPABILITIES:
            raise CapabilityError(
                f"{origin} declares unknown capability {name!r} unsupported"
                f"{_suggest(name, list(CAPABILITIES))}; known capabilities are "
                f"{', '.join(CAPABILITIES)}"
            )
    excused = Capabilities(unsupported=unsupported).unsupported_clauses()
    for cid in deviations:
        if cid not in CLAUSES:
            raise CapabilityError(
                f"{origin} declares a deviation from unknown clause {cid!r}"
                f"{_suggest(cid, list(CLAUSES))}; run `chongming-conformance clauses` "
                "for the catalogue"
            )
        if CLAUSES[cid].scope is Scope.REVIEW:
            raise CapabilityError(
                f"{origin} declares a deviation from {cid!r}, a review clause no test "
                "checks; a deviation there would excuse nothing"
            )
        if cid in excused:
            raise CapabilityError(
                f"{origin} declares a deviation from {cid!r}, which is already excused "
                f"by an unsupported capability ({excused[cid]})"
            )
    return Capabilities(unsupported=unsupported, deviations=deviations, origin=origin)


def declared_capabilities(factory: object, module: object, label: str) -> Capabilities:
    """The declaration on ``factory``, else on ``module``, else an empty one."""
    raw = getattr(factory, ATTRIBUTE, None)
    where = f"{label}.{ATTRIBUTE}"
    if raw is None:
        raw = getattr(module, ATTRIBUTE, None)
        where = f"{getattr(module, '__name__', '?')}.{ATTRIBUTE}"
    if raw is None:
        return Capabilities()
    return parse_capabilities(raw, where)
