"""Does a statement still describe what is installed here, and does it claim conformance?

Checked in this order, stopping at the first problem (the message names it):

1. the statement's form (Statement v1, test-result v0.1, :mod:`.intoto`);
2. that it is one of ours (catalogue, report and run descriptors present) and agrees
   with itself: the run descriptor's digest covers its annotations, and ``result``
   is what the lists and the run annotations make it (so editing ``result`` or a list
   alone is caught);
3. the catalogue: the installed kit's catalogue has the statement's version and digest;
4. every subject: the files installed now hash to the statement's digest (the store's
   code found from ``--store`` or the spec the statement records, the kit's from this
   installation), naming the first file that differs when the statement lists them;
5. the result: PASSED (WARNED too with ``allow_warned``).

An unsigned statement proves only that nothing changed by accident; against a forger
only a signature helps (:mod:`.signing`, checked before any of this).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..protocol.clauses import CATALOGUE_VERSION
from .digests import Subject, canonical_json, catalogue_digest, sha256_hex, subjects_for
from .intoto import statement_problems
from .statement import CATALOGUE_NAME, REPORT_NAME, RUN_NAME, configuration_entry, expected_result

__all__ = ["verify_statement"]


def _first_file_difference(listed: Mapping[str, str], now: Mapping[str, str]) -> str:
    for path in sorted(set(listed) | set(now)):
        if path not in now:
            return f"{path} is gone"
        if path not in listed:
            return f"{path} is new"
        if listed[path] != now[path]:
            return f"{path} changed (sha256 {listed[path][:12]}… then, {now[path][:12]}… now)"
    return "the files are the same but the manifest differs"


def _subject_problem(subject: Mapping[str, Any], installed: Mapping[str, Subject]) -> str | None:
    name = subject.get("name", "")
    now = installed.get(name)
    if now is None:
        found = ", ".join(sorted(installed)) or "nothing"
        return (f"subject {name!r} is not what is installed here (found {found}): another "
                "store, version or install")
    wanted = subject["digest"].get("sha256")
    if wanted == now.sha256:
        return None
    listed = subject.get("annotations", {}).get("chongming:files")
    how = f" ({now.identified_by})"
    if isinstance(listed, Mapping):
        return f"subject {name!r}{how} differs: {_first_file_difference(listed, now.files)}"
    return (f"subject {name!r}{how} differs: sha256 {str(wanted)[:12]}… in the statement, "
            f"{now.sha256[:12]}… installed")


def _self_problem(statement: Mapping[str, Any]
                  ) -> tuple[str | None, dict[str, Mapping[str, Any]]]:
    """A problem with the statement's own consistency, or None and its three descriptors."""
    entries: dict[str, Mapping[str, Any]] = {}
    for name in (CATALOGUE_NAME, REPORT_NAME, RUN_NAME):
        entry = configuration_entry(statement, name)
        if entry is None or not isinstance(entry.get("digest"), Mapping):
            return f"predicate.configuration has no {name!r} entry with a digest: not a " \
                   "chongming statement", {}
        entries[name] = entry
    run = entries[RUN_NAME].get("annotations", {})
    if sha256_hex(canonical_json(run)) != entries[RUN_NAME]["digest"].get("sha256"):
        return f"the {RUN_NAME!r} annotations do not match their digest: edited", {}
    predicate = statement["predicate"]
    try:
        wanted = expected_result(list(predicate.get("failedTests", [])),
                                 list(predicate.get("warnedTests", [])), run)
    except KeyError as exc:
        return f"the {RUN_NAME!r} annotations lack {exc}", {}
    if predicate["result"] != wanted:
        return (f"predicate.result is {predicate['result']} but its tests and run make it "
                f"{wanted}: edited"), {}
    return None, entries


def verify_statement(
    statement: Mapping[str, Any],
    store_spec: str | None = None,
    *,
    allow_warned: bool = False,
) -> str | None:
    """None if ``statement`` matches this installation and claims conformance; otherwise
    the first problem, in words."""
    problems = statement_problems(statement)
    if problems:
        return f"not an in-toto test-result statement: {problems[0]}"
    problem, entries = _self_problem(statement)
    if problem is not None:
        return problem
    catalogue = entries[CATALOGUE_NAME]
    version = catalogue.get("annotations", {}).get("version")
    if version != CATALOGUE_VERSION:
        return (f"catalogue: the statement was made with catalogue {version!r}, the installed "
                f"kit has {CATALOGUE_VERSION!r}")
    if catalogue["digest"].get("sha256") != catalogue_digest():
        return (f"catalogue {CATALOGUE_VERSION}: its clauses differ from the installed kit's "
                "(digest mismatch)")
    run = entries[RUN_NAME]["annotations"]
    specs = [store_spec] if store_spec else [s for s in (run.get("storeSpec"),
                                                          run.get("sharedStoreSpec")) if s]
    try:
        installed = {s.name: s for s in subjects_for(specs)}
    except LookupError as exc:
        return str(exc)
    for subject in statement["subject"]:
        problem = _subject_problem(subject, installed)
        if problem is not None:
            return problem
    result = statement["predicate"]["result"]
    if result == "PASSED" or (result == "WARNED" and allow_warned):
        return None
    predicate = statement["predicate"]
    named = predicate.get("failedTests") or predicate.get("warnedTests") or []
    detail = f": {', '.join(named[:5])}" if named else f" ({run.get('verdict')})"
    return f"the result is {result}, not PASSED{detail}"
