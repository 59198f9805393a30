"""The reference stores stand alone: a copy needs nothing of the kit but its public model.

``reference_stores/`` are templates a backend author copies into a production store
(issue 33). A copy that imports the kit's report package, its fault machinery or its
progress notes would drag the conformance kit into production and break whenever the kit
reorganises its internals. So every ``reference_stores/*.py`` may import, of the kit:

* the public modules ``chongming_conformance.protocol`` and its ``.model``, ``.errors`` and
  ``.codec`` (not the rest of that package: the catalogue, capabilities and alphabet are the
  kit's), and the names ``chongming_conformance`` re-exports from them;
* the kit's seams a factory hands to the kit (``.seam.progress`` for progress notes,
  ``.faults`` for ``chongming_deployment()``'s ``Deployment``) only inside a function
  -- imported when the kit calls it, never when the store is imported -- or under
  ``if TYPE_CHECKING:``.

The rule is read from the source (:func:`kit_import_problems`, which names file, line
and import), proved to bite on the imports the stores had before (``SHOULD_FAIL``), and
checked at run time too: importing a store loads no kit module beyond the public ones.
The two stores that replaced the kit's ``mask_secrets`` with a local helper are checked
on the DSN forms their errors carry.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chongming_conformance
from chongming_conformance import protocol
from chongming_conformance.protocol import codec, errors, model

ROOT = Path(__file__).resolve().parent.parent
STORES = sorted((ROOT / "reference_stores").glob("*.py"))

KIT = "chongming_conformance"
#: The public modules a copied store may import.
PUBLIC = frozenset({f"{KIT}.protocol",
                    *(f"{KIT}.protocol.{m}" for m in ("model", "errors", "codec"))})
#: The other modules of the ``protocol`` package: the kit's, not a copied store's.
PRIVATE_SIBLINGS = frozenset(
    f"{KIT}.protocol.{info.name}" for info in pkgutil.iter_modules(protocol.__path__)
) - PUBLIC
#: What ``from chongming_conformance import ...`` may take: the re-exports of those modules.
PUBLIC_NAMES = frozenset(chongming_conformance.__all__) & frozenset(
    name for module in (model, protocol, errors, codec) for name in module.__all__
)
#: The kit's seams, importable only where the kit calls the store's factory module.
SEAMS = frozenset({f"{KIT}.seam.progress", f"{KIT}.faults"})
_DYNAMIC = frozenset({"import_module", "__import__"})


def _public(module: str) -> bool:
    return module in PUBLIC


def _seam(module: str) -> bool:
    return module in SEAMS or any(module.startswith(f"{s}.") for s in SEAMS)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    """Each import of the kit, with whether it runs when the module is imported."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.AST, str, tuple[str, ...], bool]] = []
        self._deferred = 0  # inside a function body or an ``if TYPE_CHECKING:`` block

    def _defer(self, node: ast.AST) -> None:
        self._deferred += 1
        self.generic_visit(node)
        self._deferred -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _defer

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self._deferred += 1
        for child in node.body:
            self.visit(child)
        self._deferred -= 1
        for child in node.orelse:
            self.visit(child)

    def _add(self, node: ast.AST, module: str, names: tuple[str, ...] = ()) -> None:
        if module == KIT or module.startswith(f"{KIT}."):
            self.found.append((node, module, names, self._deferred > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._add(node, node.module, tuple(a.name for a in node.names))
        elif node.level > 1:  # above reference_stores/: outside the copied files
            self.found.append((node, "." * node.level + (node.module or ""), (), False))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if (name in _DYNAMIC and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            self._add(node, node.args[0].value)
        self.generic_visit(node)


def kit_import_problems(source: str, filename: str) -> list[str]:
    """``file:line: import -- why`` for every import of the kit the templates may not make."""
    visitor = _Imports()
    visitor.visit(ast.parse(source, filename))
    problems = []
    for node, module, names, deferred in visitor.found:
        where = f"{filename}:{getattr(node, 'lineno', '?')}: {ast.unparse(node)}"
        if module.startswith("."):
            problems.append(f"{where} -- a relative import reaching outside reference_stores")
        elif module == KIT:
            bad = [n for n in names if n not in PUBLIC_NAMES and f"{KIT}.{n}" not in PUBLIC]
            if not names or bad:
                problems.append(f"{where} -- {', '.join(bad) or KIT} is not the public model, "
                                "protocol, errors or codec")
        elif _public(module):
            private = [n for n in names if f"{module}.{n}" in PRIVATE_SIBLINGS]
            if private:
                problems.append(f"{where} -- {', '.join(private)} is not the public model, "
                                "protocol, errors or codec")
        elif _seam(module) and deferred:
            continue
        elif _seam(module):
            problems.append(f"{where} -- {module} is a kit seam: import it inside the function "
                            "the kit calls, not when the store is imported")
        else:
            problems.append(f"{where} -- {module} is not the public model, protocol, errors "
                            "or codec; a copied store would depend on the kit's internals")
    return problems


def test_every_template_imports_only_the_public_model() -> None:
    assert STORES, "no reference store found"
    problems = [p for path in STORES
                for p in kit_import_problems(path.read_text(encoding="utf-8"),
                                             str(path.relative_to(ROOT)))]
    assert problems == []


#: The rule bites: each of these was in a template before issue 33, or is a way around it.
SHOULD_FAIL = {
    "report": "from chongming_conformance.report.masking import mask_secrets",
    "seam at import": "from chongming_conformance.seam.progress import note as progress_note",
    "faults at import": "from chongming_conformance.faults import Deployment",
    "plain import": "import chongming_conformance.report.masking",
    "top-level non-public": "from chongming_conformance import StoreError, CLAUSES",
    "top-level package": "import chongming_conformance",
    "top-level submodule": "from chongming_conformance import report",
    "dynamic": "import importlib\nimportlib.import_module('chongming_conformance.report')",
    "report in a function": "def f():\n    from chongming_conformance.report import mask_secrets",
    "else of TYPE_CHECKING": "if TYPE_CHECKING:\n    pass\nelse:\n"
                             "    from chongming_conformance.faults import Deployment",
    "outside the package": "from .. import something",
    "protocol's catalogue": "from chongming_conformance.protocol.clauses import CLAUSES",
    "protocol's catalogue by name": "from chongming_conformance.protocol import clauses",
}
SHOULD_PASS = {
    "top-level public": "from chongming_conformance import StoreError, TaskSnapshot, TaskStore",
    "public modules": "from chongming_conformance.protocol.codec import encode_dt\n"
                      "from chongming_conformance.protocol.errors import StoreError\n"
                      "import chongming_conformance.protocol.model",
    "public module by name": "from chongming_conformance.protocol import codec",
    "seam in a function": "def chongming_deployment():\n"
                          "    from chongming_conformance.faults import Deployment",
    "seam for the type checker": "if TYPE_CHECKING:\n"
                                 "    from chongming_conformance.faults import Deployment",
    "sibling": "from .postgres_schema import install_schema",
}


@pytest.mark.parametrize("source", SHOULD_FAIL.values(), ids=SHOULD_FAIL.keys())
def test_the_rule_names_file_line_and_import(source: str) -> None:
    problems = kit_import_problems(source, "reference_stores/x.py")
    assert len(problems) == 1, problems
    last_line = len(source.splitlines())
    assert problems[0].startswith(f"reference_stores/x.py:{last_line}: "), problems


@pytest.mark.parametrize("source", SHOULD_PASS.values(), ids=SHOULD_PASS.keys())
def test_the_rule_lets_the_public_model_and_deferred_seams_through(source: str) -> None:
    assert kit_import_problems(source, "reference_stores/x.py") == []


_LOADED = """
import importlib, json, sys
import chongming_conformance.protocol.codec
base = set(sys.modules)
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(m for m in set(sys.modules) - base if m.startswith("chongming"))))
"""


@pytest.mark.parametrize("name", [p.stem for p in STORES if p.stem != "__init__"])
def test_importing_a_template_loads_no_other_kit_module(name: str) -> None:
    """What the source rule cannot see (a helper that imports the kit for the store): in a
    fresh interpreter, importing the store loads no kit module beyond the public ones."""
    driver = {"postgres": "psycopg", "postgres_schema": "psycopg",
              "mariadb": "pymysql", "mariadb_schema": "pymysql"}.get(name)
    if driver is not None:
        pytest.importorskip(driver, reason=f"{driver} is an optional extra")
    done = subprocess.run([sys.executable, "-c", _LOADED, f"reference_stores.{name}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(done.stdout) == []


# -- the local masking that replaced the kit's ----------------------------------------------------
def _maskers() -> list[object]:
    found = []
    for module, driver in (("reference_stores.postgres_schema", "psycopg"),
                           ("reference_stores.mariadb_schema", "pymysql")):
        try:
            __import__(driver)
        except ImportError:
            continue
        found.append(pytest.param(__import__(module, fromlist=["_mask_secrets"])._mask_secrets,
                                  id=module.rsplit(".", 1)[1]))
    return found


MASKERS = _maskers()

# Every printable character but whitespace, quotes and backslash: what a DSN password holds
# unquoted, ``/ : @`` included (tests/test_masking.py generates the kit's the same way).
_PASSWORD_CHARS = st.characters(min_codepoint=0x21, max_codepoint=0x7E,
                                blacklist_characters="\"'\\")
passwords = st.text(_PASSWORD_CHARS, min_size=8, max_size=24).filter(
    lambda s: any(c.isalpha() for c in s) and any(c.isdigit() for c in s))


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("postgresq://postgres:s3cret/p@ss@db.example/x: missing \"=\"",
         "postgresq://postgres:***@db.example/x: missing \"=\""),
        ("invalid MariaDB DSN 'mysql://u:pw-x1@h:notaport/db': bad port",
         "invalid MariaDB DSN 'mysql://u:***@h:notaport/db': bad port"),
        ("host=db password=s3cr3t user=u", "host=db password=*** user=u"),
        ("host=db password='a b\\' c' user=u", "host=db password='***' user=u"),
        ("sslpassword=k3y PGPASSWORD=s3cr3t", "sslpassword=*** PGPASSWORD=***"),
        ("mysql://u@h/db?password=s3cr3t", "mysql://u@h/db?password=***"),
        # Nothing secret: left as it is.
        ("connection to 127.0.0.1:5432 refused; user=app dbname=x max_tokens=5",
         "connection to 127.0.0.1:5432 refused; user=app dbname=x max_tokens=5"),
        ("Access denied for user 'app'@'10.0.0.1' (using password: YES)",
         "Access denied for user 'app'@'10.0.0.1' (using password: YES)"),
    ],
)
@pytest.mark.parametrize("mask", MASKERS)
def test_the_dsn_forms_are_masked(mask: object, text: str, masked: str) -> None:
    assert mask(text) == masked  # type: ignore[operator]


@pytest.mark.parametrize("mask", MASKERS)
@given(password=passwords)
def test_no_generated_password_survives(mask: object, password: str) -> None:
    for text in (f"postgresql://app:{password}@db.example:5432/x",
                 f"mysql://app:{password}@db.example/x",
                 f"host=db.example password={password} dbname=x",
                 f"failed: 'host=db sslpassword={password}'"):
        out = mask(text)  # type: ignore[operator]
        assert password not in out and "***" in out, (text, out)
