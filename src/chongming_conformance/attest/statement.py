"""A report document turned into an in-toto Statement v1 with the test-result predicate.

The statement is built from the JSON report alone (plus the installed files its
subjects name), so the plugin's ``--chongming-attest`` and ``chongming-conformance
attest REPORT.json`` write the same statement for the same run.

How the kit's words map onto the predicate's:

* ``passedTests``: the clauses that PASS;
* ``failedTests``: the gated MUST clauses that FAIL;
* ``warnedTests``: every other FAIL (a SHOULD clause, or one left out of the gate);
* ``result``: FAILED unless the verdict is a conformance claim (a partial run, a MUST
  clause FAIL or NOT VERIFIED, a failed test no clause took are all FAILED); WARNED
  when it is one but some clause is in ``warnedTests``; PASSED otherwise. A SHOULD
  clause NOT VERIFIED (PRUNE-LARGE outside the thorough profile) warns of nothing that
  failed: it is listed with the other NOT VERIFIED clauses, and ``gatePassed`` in the
  run annotations says whether a ``should`` gate passed.

NOT VERIFIED, UNSUPPORTED and DEVIATION are no test result of either kind: they are
listed, by clause id, in the run descriptor's annotations, with the settings the
verdict depends on. Every string passes through the report's masking first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..protocol.clauses import CATALOGUE_VERSION
from ..report.masking import mask_all
from .digests import canonical_json, catalogue_digest, driver_versions, sha256_hex, subjects_for
from .intoto import PREDICATE_TYPE, STATEMENT_TYPE

__all__ = [
    "CATALOGUE_NAME",
    "REPORT_NAME",
    "RUN_NAME",
    "build_statement",
    "configuration_entry",
    "expected_result",
    "store_specs",
]

CATALOGUE_NAME = "chongming-conformance clause catalogue"
REPORT_NAME = "chongming-conformance report"
RUN_NAME = "chongming-conformance run"

#: Subjects with at most this many files carry their per-file digests (so ``verify`` can
#: name the file that changed); a larger one carries only the manifest digest.
FILES_LISTED_UP_TO = 500


def store_specs(doc: Mapping[str, Any]) -> list[str]:
    """The store and shared-store specs a report names (the code its subjects cover)."""
    store = doc["store"]
    return [s for s in (store["spec"], store.get("shared_spec")) if s]


def _by_outcome(doc: Mapping[str, Any], outcome: str) -> list[str]:
    return [c["id"] for c in doc["clauses"] if c["outcome"] == outcome]


def expected_result(failed: list[str], warned: list[str], run: Mapping[str, Any]) -> str:
    """The predicate's result from its own lists and the run annotations (``verify``
    checks a statement against this, so an edited ``result`` alone is caught)."""
    if failed or run["partialReasons"] or not str(run["verdict"]).startswith("conforms"):
        return "FAILED"
    if warned:
        return "WARNED"
    return "PASSED"


def _run_annotations(doc: Mapping[str, Any]) -> dict[str, Any]:
    run, env = doc["run"], doc["environment"]
    specs = store_specs(doc)
    return {
        "storeSpec": doc["store"]["spec"],
        "sharedStoreSpec": doc["store"].get("shared_spec"),
        "verdict": doc["verdict"],
        "gate": run["gate"],
        "gatePassed": run["gate_passed"],
        "partialReasons": list(run["partial_reasons"]),
        "profile": run.get("profile"),
        "hypothesisSeed": run.get("hypothesis_seed"),
        "seed": run.get("seed"),
        "stressProfile": run.get("stress_profile"),
        "topology": run.get("topology"),
        "python": f"{env['implementation']} {env['python']}",
        "platform": env["platform"],
        "pytest": env["pytest"],
        "hypothesis": env.get("hypothesis"),
        "drivers": driver_versions(specs),
        "notVerified": _by_outcome(doc, "NOT VERIFIED"),
        "unsupported": _by_outcome(doc, "UNSUPPORTED"),
        "deviations": _by_outcome(doc, "DEVIATION"),
    }


def configuration_entry(statement: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The configuration descriptor called ``name`` in a statement (None: absent)."""
    for entry in statement.get("predicate", {}).get("configuration", []):
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    return None


def build_statement(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The Statement for a report document produced by this kit's catalogue.

    Raises ``ValueError`` when the report was judged against another catalogue (the
    statement would bind this kit's catalogue to another one's verdicts) and
    ``LookupError`` when a store's code cannot be found.
    """
    if doc.get("catalogue_version") != CATALOGUE_VERSION:
        raise ValueError(f"the report was judged against catalogue "
                         f"{doc.get('catalogue_version')!r}; this kit's is "
                         f"{CATALOGUE_VERSION!r}: attest it with the kit that made it")
    passed = _by_outcome(doc, "PASS")
    failed = [c["id"] for c in doc["clauses"]
              if c["outcome"] == "FAIL" and c["level"] == "MUST" and c["gated"]]
    warned = [c["id"] for c in doc["clauses"]
              if c["outcome"] == "FAIL" and c["id"] not in failed]
    run = mask_all(_run_annotations(doc))
    subjects = subjects_for(store_specs(doc))
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [
            s.descriptor(with_files="store" in s.roles and len(s.files) <= FILES_LISTED_UP_TO)
            for s in subjects
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "result": expected_result(failed, warned, run),
            "configuration": [
                {"name": CATALOGUE_NAME, "digest": {"sha256": catalogue_digest()},
                 "annotations": {"version": CATALOGUE_VERSION}},
                {"name": REPORT_NAME, "digest": {"sha256": sha256_hex(canonical_json(doc))},
                 "annotations": {"kitVersion": doc["kit_version"],
                                 "schemaVersion": doc["schema_version"],
                                 "startedAt": doc["run"]["started_at"]}},
                {"name": RUN_NAME, "digest": {"sha256": sha256_hex(canonical_json(run))},
                 "annotations": run},
            ],
            "passedTests": passed,
            "warnedTests": warned,
            "failedTests": failed,
        },
    }
    masked: dict[str, Any] = mask_all(statement)
    return masked
