"""The properties and the state machine, run against every reference store.

The same classes the packaged suite subclasses; settings come from
``hypothesis_profiles.active_settings()`` (the kit's ``ci`` profile unless a profile was
chosen with ``--hypothesis-profile`` or ``--chongming-profile``).
"""

from __future__ import annotations

from chongming_conformance.checking.properties import CodecProperties, StoreProperties
from chongming_conformance.checking.stateful import StoreStateMachineTests
from reference_stores import memory, sqlite


class TestCodecProperties(CodecProperties):
    pass


class TestMemoryProperties(StoreProperties):
    def make_store(self) -> memory.InMemoryTaskStore:
        return memory.make_store()


class TestMemoryStateMachine(StoreStateMachineTests):
    def make_store(self) -> memory.InMemoryTaskStore:
        return memory.make_store()


class TestSqliteFileProperties(StoreProperties):
    def make_store(self) -> object:
        return sqlite.make_store()  # generator: a temp directory per example, removed after


class TestSqliteFileStateMachine(StoreStateMachineTests):
    def make_store(self) -> object:
        return sqlite.make_store()


class TestSqliteMemoryProperties(StoreProperties):
    def make_store(self) -> sqlite.SqliteTaskStore:
        return sqlite.make_memory_store()


class TestSqliteMemoryStateMachine(StoreStateMachineTests):
    def make_store(self) -> sqlite.SqliteTaskStore:
        return sqlite.make_memory_store()
