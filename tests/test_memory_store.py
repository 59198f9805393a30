"""The in-memory reference store runs the whole contract, as any third party's would."""

from __future__ import annotations

from chongming_conformance.checking.contract import StoreContract
from reference_stores import memory


class TestInMemoryContract(StoreContract):
    def make_store(self) -> memory.InMemoryTaskStore:
        return memory.make_store()
