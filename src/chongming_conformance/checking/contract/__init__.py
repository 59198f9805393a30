"""StoreContract: the single-connection contract every TaskStore must pass.

Subclass it, implement ``make_store()``, and pytest collects the tests::

    from chongming_conformance.checking.contract import StoreContract

    class TestMyStore(StoreContract):
        def make_store(self):
            return MyStore(...)          # or a generator / context manager

The hooks (``make_store``, optional ``wrap_store`` and ``guard``) are the
seam every single-connection base shares: :mod:`chongming_conformance.seam`.

No pytest import is needed (plain ``assert``), so the contract is a
specification first and a test file second. Each test is named after the
clause it checks (``test_<clause>__<what>``) and declares it with
``@checks``; the catalogue is in ``chongming_conformance.protocol.clauses``.

One module per protocol group, so a clause's checks are found by its area:

==============  =====================================================
``tasks``       create, get, save (conditional writes)
``queries``     query, counts
``history``     append, history
``touch``       touch
``commands``    submit / claim / complete / release
``roundtrip``   every field round-trips; time compared as an instant
``lifecycle``   the protocol's shape, prune, close
==============  =====================================================

Every conditional write has a ``_conflict`` twin: it provokes the refusal and
then re-reads the store to prove nothing changed. Every store the contract
opens is closed by ``teardown_method``.

What this cannot see: anything across processes. See the stress harness.
"""

from __future__ import annotations

from ._base import ContractBase
from .commands import CommandContract
from .history import HistoryContract
from .lifecycle import LifecycleContract
from .queries import QueryContract
from .roundtrip import RoundTripContract
from .tasks import TaskContract
from .touch import TouchContract

__all__ = [
    "CommandContract",
    "ContractBase",
    "HistoryContract",
    "LifecycleContract",
    "QueryContract",
    "RoundTripContract",
    "StoreContract",
    "TaskContract",
    "TouchContract",
]


class StoreContract(
    TaskContract,
    QueryContract,
    HistoryContract,
    TouchContract,
    CommandContract,
    LifecycleContract,
    RoundTripContract,
):
    """Base class: implement ``make_store()``; every ``test_*`` method is one check."""
