"""What an attestation is about, by digest: the store's code, the kit, the catalogue, the report.

A subject is a list of files reduced to one sha256: the digest of a manifest whose
lines are ``<sha256 of the file>  <relative path>``, sorted by path. The files are
found one of two ways, and the subject says which (``chongming:identifiedBy``):

* **an installed distribution's RECORD** when the store's top-level package (or the
  kit) was installed from a wheel or sdist: every file RECORD lists, re-hashed from
  disk (RECORD's own hashes are not trusted: a file edited after installation must
  change the digest), except compiled ``.pyc`` files, RECORD itself and the three
  files that differ between two installs of the same wheel (``INSTALLER``,
  ``REQUESTED``, ``direct_url.json``), and the console scripts outside site-packages;
* **the package's files** otherwise (a source checkout, an editable install, a module
  on ``PYTHONPATH``): every file under the top-level package's directory except
  ``__pycache__``, or the one file of a top-level module.

Finding the files never imports the store's package: ``importlib.util.find_spec`` of
the top-level name reads the file system only, so ``verify`` runs no store code.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata as metadata
import importlib.util
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..report.catalogue import render_catalogue

__all__ = [
    "BY_PACKAGE_FILES",
    "BY_RECORD",
    "KIT_DISTRIBUTION",
    "Subject",
    "canonical_json",
    "catalogue_digest",
    "driver_versions",
    "kit_subject",
    "sha256_hex",
    "subject_of",
    "subjects_for",
    "top_level_name",
]

KIT_DISTRIBUTION = "chongming-conformance"
BY_RECORD = "installed distribution RECORD"
BY_PACKAGE_FILES = "package files"

#: RECORD entries that differ between two installations of one wheel, left out.
_INSTALL_SPECIFIC = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"})


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> bytes:
    """One byte string per JSON value (sorted keys, no spaces): what a digest of JSON covers."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def catalogue_digest() -> str:
    """sha256 of the installed kit's clause catalogue (ids, levels, sections, texts)."""
    return sha256_hex(render_catalogue("json").encode())


@dataclass(frozen=True)
class Subject:
    """One in-toto subject: a name, a sha256 over a manifest of files, how they were found."""

    name: str
    sha256: str
    identified_by: str
    roles: tuple[str, ...]
    #: relative path -> sha256, so ``verify`` can name the first file that changed.
    files: Mapping[str, str] = field(default_factory=dict)

    def descriptor(self, *, with_files: bool) -> dict[str, Any]:
        """The subject as an in-toto ResourceDescriptor."""
        annotations: dict[str, Any] = {
            "chongming:identifiedBy": self.identified_by,
            "chongming:roles": list(self.roles),
        }
        if with_files:
            annotations["chongming:files"] = dict(self.files)
        return {"name": self.name, "digest": {"sha256": self.sha256},
                "annotations": annotations}


def _manifest_digest(files: Mapping[str, str]) -> str:
    lines = "".join(f"{digest}  {path}\n" for path, digest in sorted(files.items()))
    return sha256_hex(lines.encode())


def _hash_files(paths: Iterable[tuple[str, Path]]) -> dict[str, str]:
    return {rel: sha256_hex(path.read_bytes()) for rel, path in paths}


def top_level_name(spec: str) -> str:
    """``mypkg`` of ``mypkg.sub:make_store`` (a spec's module part, first dotted name)."""
    return spec.partition(":")[0].split(".")[0]


def _package_root(module: str) -> Path | None:
    """The directory of ``module``'s top-level regular package, or its file; None if unknown.

    A namespace package (no ``__init__.py``) is not one place: the highest regular
    package holding the module stands for it instead.
    """
    top = importlib.util.find_spec(module.split(".")[0])
    if top is None:
        return None
    if top.origin and top.has_location:
        origin = Path(top.origin)
        return origin.parent if top.submodule_search_locations is not None else origin
    found = importlib.util.find_spec(module)  # namespace: its parents are imported, not run
    if found is None or not found.origin:
        return None
    here = Path(found.origin)
    root = here
    while (here.parent / "__init__.py").is_file():
        here = root = here.parent
    return root


def _record_files(root: Path) -> tuple[str, str, dict[str, str]] | None:
    """(distribution name, version, files) when an installed distribution's RECORD lists
    ``root``'s files (an editable install lists none of them: None)."""
    target = (root / "__init__.py") if root.is_dir() else root
    names = metadata.packages_distributions().get(
        root.name if root.is_dir() else root.stem, []
    )
    for name in dict.fromkeys(names):
        dist = metadata.distribution(name)
        listed = dist.files or []
        located = {f: Path(str(dist.locate_file(f))).resolve() for f in listed}
        if target.resolve() not in located.values():
            continue
        kept = [
            (f.as_posix(), path) for f, path in located.items()
            if not f.as_posix().startswith("..") and f.suffix != ".pyc"
            and f.name not in _INSTALL_SPECIFIC and path.is_file()
        ]
        return dist.metadata["Name"], dist.version, _hash_files(kept)
    return None


def _package_files(root: Path) -> dict[str, str]:
    if root.is_file():
        return _hash_files([(root.name, root)])
    found = [
        (path.relative_to(root.parent).as_posix(), path)
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]
    return _hash_files(found)


def subject_of(module: str, role: str) -> Subject | None:
    """The subject for the code ``module`` belongs to; None when it cannot be found."""
    root = _package_root(module)
    if root is None:
        return None
    recorded = _record_files(root)
    if recorded is not None:
        name, version, files = recorded
        normal = name.lower().replace("_", "-")
        return Subject(f"pkg:pypi/{normal}@{version}", _manifest_digest(files), BY_RECORD,
                       (role,), files)
    files = _package_files(root)
    label = root.name if root.is_dir() else root.stem
    return Subject(label, _manifest_digest(files), BY_PACKAGE_FILES, (role,), files)


def kit_subject() -> Subject:
    """The kit's own code (the ``chongming_conformance`` package or its distribution)."""
    subject = subject_of("chongming_conformance", "kit")
    if subject is None:  # pragma: no cover - this module is part of it
        raise RuntimeError("the kit's own package cannot be found")
    if subject.identified_by == BY_PACKAGE_FILES:
        # Named like the distribution even from a checkout, with the version it declares.
        subject = Subject(f"pkg:pypi/{KIT_DISTRIBUTION}@{__version__}", subject.sha256,
                          subject.identified_by, subject.roles, subject.files)
    return subject


def subjects_for(specs: Iterable[str]) -> list[Subject]:
    """The subjects of the stores' code and the kit, one per distinct set of files.

    A store shipped inside the kit's own wheel (``reference_stores``) is the kit's
    subject with both roles. Raises ``LookupError`` naming a spec whose code is not found.
    """
    subjects: dict[str, Subject] = {}

    def add(subject: Subject) -> None:
        known = subjects.get(subject.name)
        if known is not None and known.sha256 == subject.sha256:
            roles = tuple(dict.fromkeys((*known.roles, *subject.roles)))
            subject = Subject(known.name, known.sha256, known.identified_by, roles,
                              known.files)
        subjects[subject.name] = subject

    for spec in dict.fromkeys(specs):
        module = spec.partition(":")[0]
        found = subject_of(module, "store")
        if found is None:
            raise LookupError(f"the code of {spec!r} cannot be found: no module "
                              f"{module!r} on sys.path")
        add(found)
    add(kit_subject())
    return list(subjects.values())


def _imported_top_levels(files: Iterable[Path]) -> set[str]:
    names: set[str] = set()
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def driver_versions(specs: Iterable[str]) -> dict[str, str]:
    """Installed versions of the third-party distributions the stores' code imports.

    Read from the stores' source (``import psycopg`` -> ``psycopg``), not from what
    happens to be imported, so a report attested later names the same drivers.
    """
    files: list[Path] = []
    own: set[str] = {"chongming_conformance"}
    for spec in specs:
        root = _package_root(spec.partition(":")[0])
        if root is None:
            continue
        own.add(root.name if root.is_dir() else root.stem)
        files.extend([root] if root.is_file() else root.rglob("*.py"))
    imported = _imported_top_levels(files) - own - set(sys.stdlib_module_names)
    mapping = metadata.packages_distributions()
    versions: dict[str, str] = {}
    for name in sorted(imported):
        for dist in mapping.get(name, []):
            versions[dist] = metadata.version(dist)
    return versions
