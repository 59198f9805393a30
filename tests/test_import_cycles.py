"""No import cycles in the kit or the reference stores: a lower module never imports an upper one.

The graph is grimp's (the library import-linter is built on): every ``import`` in the
source, including the ones inside functions -- a lazy import only hides a cycle from the
interpreter, not from a reader. Imports under ``if TYPE_CHECKING:`` are left out: they
never run.
"""

from __future__ import annotations

import grimp

PACKAGES = ("chongming_conformance", "reference_stores")


def import_cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """Each cycle once, as the chain of modules that closes it (``a -> b -> ... -> a``)."""
    found: dict[frozenset[str], tuple[str, ...]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                chain = (importer, *back)
                found.setdefault(frozenset(chain), chain)
    return sorted(found.values())


def test_there_is_no_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    cycles = import_cycles(graph)
    assert not cycles, "import cycles (move the shared piece below both modules):\n" + "\n".join(
        "  " + " -> ".join(chain) for chain in cycles
    )


def test_the_cycle_finder_finds_a_cycle() -> None:
    """Teeth: the finder reports a two-module cycle it is handed."""
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.low", "pkg.high"):
        graph.add_module(name)
    graph.add_import(importer="pkg.high", imported="pkg.low")
    assert import_cycles(graph) == []
    graph.add_import(importer="pkg.low", imported="pkg.high")
    assert import_cycles(graph) == [("pkg.high", "pkg.low", "pkg.high")]
