"""No import cycles in the kit or the reference stores: a lower module never imports an upper one.

The graph is grimp's (the library import-linter is built on): every ``import`` in the
source, including the ones inside functions -- a lazy import only hides a cycle from the
interpreter, not from a reader. Imports under ``if TYPE_CHECKING:`` are left out: they
never run.

The kit's parts are layered too (docs/architecture.md, "The parts"): ``LAYERS`` lists them
from the top down, a part imports only parts below it, and the parts of one layer do not
import each other.
"""

from __future__ import annotations

import grimp

PACKAGES = ("chongming_conformance", "reference_stores")
KIT = "chongming_conformance"

#: The kit's parts from the top down (docs/architecture.md, "The parts"). A part may import
#: the parts of any layer below its own; the parts in one set are independent of each other.
LAYERS: tuple[str | set[str], ...] = (
    "plugin",
    {"commands", "suite"},
    {"checking", "stress", "attest"},
    "seam",
    {"report", "strategies"},
    {"oracle", "controller", "faults"},
    "protocol",
)


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



def layer_violations(graph: grimp.ImportGraph) -> list[str]:
    """Each import chain that goes up a layer or across a set: ``part -> part: a -> ... -> b``."""
    found = graph.find_illegal_dependencies_for_layers(layers=LAYERS, containers={KIT})
    return sorted(
        f"{dependency.importer} -> {dependency.imported}: "
        + " -> ".join(("|".join(sorted(route.heads)), *route.middle, "|".join(sorted(route.tails))))
        for dependency in found
        for route in dependency.routes
    )


def test_every_part_imports_only_the_layers_below_it() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    violations = layer_violations(graph)
    assert not violations, (
        "imports against the layers of docs/architecture.md (move the shared piece down, "
        "or the importer up):\n" + "\n".join("  " + v for v in violations)
    )


def test_every_part_has_a_layer() -> None:
    """A new part is placed in LAYERS (and in the architecture page's table) on purpose."""
    graph = grimp.build_graph(KIT, exclude_type_checking_imports=True)
    parts = {m.rsplit(".", 1)[1] for m in graph.find_children(KIT)}
    placed = {p for layer in LAYERS for p in ([layer] if isinstance(layer, str) else layer)}
    assert parts == placed


def test_the_top_level_package_is_the_protocol_face() -> None:
    """``chongming_conformance`` re-exports the protocol's names and imports nothing else."""
    graph = grimp.build_graph(KIT, exclude_type_checking_imports=True)
    imported = graph.find_modules_directly_imported_by(KIT)
    assert imported and all(m.startswith(f"{KIT}.protocol") for m in imported), imported


def test_the_layer_check_finds_an_upward_import() -> None:
    """Teeth: a protocol module importing the plugin is reported."""
    graph = grimp.ImportGraph()
    for name in (KIT, *(f"{KIT}.{p}" for p in ("plugin", "protocol", "protocol.model"))):
        graph.add_module(name)
    graph.add_import(importer=f"{KIT}.protocol.model", imported=f"{KIT}.plugin")
    assert layer_violations(graph) == [
        f"{KIT}.protocol -> {KIT}.plugin: {KIT}.protocol.model -> {KIT}.plugin"
    ]
