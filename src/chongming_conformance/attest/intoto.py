"""The in-toto formats an attestation uses, checked field by field from their specifications.

* Statement v1 (in-toto/attestation ``spec/v1/statement.md``): ``_type`` is
  ``https://in-toto.io/Statement/v1``; ``subject`` is a non-empty list of
  ResourceDescriptors, each of which MUST have a ``digest``; ``predicateType`` is a
  URI; ``predicate`` is an object.
* ResourceDescriptor v1 (``spec/v1/resource_descriptor.md``): at least one of
  ``uri``, ``digest``, ``content``; ``digest`` maps an algorithm to a lowercase hex
  value (sha256: 64 digits); ``annotations`` is an object; ``name``, ``uri``,
  ``downloadLocation``, ``mediaType`` are strings.
* Test result v0.1 (``spec/predicates/test-results.md``, with the result as the
  PASSED / WARNED / FAILED enumeration of the framework's protobuf definition):
  ``result`` and ``configuration`` (a list of ResourceDescriptors) are required;
  ``url`` is a string; ``passedTests``, ``warnedTests``, ``failedTests`` are lists of
  strings; a PASSED result has empty ``warnedTests`` and ``failedTests``.

No maintained Python package validates these (in-toto's Python library carries the
older link format; the attestation repository ships protobuf definitions, not JSON
Schema), so the rules are written here, each with the spec's wording in mind, and
unknown fields are allowed as the framework's parsing rules require.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DSSE_PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "RESULTS",
    "STATEMENT_TYPE",
    "statement_problems",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
DSSE_PAYLOAD_TYPE = "application/vnd.in-toto+json"
RESULTS = ("PASSED", "WARNED", "FAILED")

_HEX = re.compile(r"[0-9a-f]+")
_HEX_LENGTHS = {"sha256": 64, "sha512": 128, "sha384": 96, "sha1": 40, "gitCommit": 40}


def _descriptor_problems(value: Any, where: str, *, digest_required: bool) -> list[str]:
    if not isinstance(value, Mapping):
        return [f"{where} is not an object"]
    problems: list[str] = []
    if digest_required and "digest" not in value:
        problems.append(f"{where} has no digest (a subject MUST have one)")
    elif not any(key in value for key in ("uri", "digest", "content")):
        problems.append(f"{where} has none of uri, digest, content")
    for key in ("name", "uri", "downloadLocation", "mediaType", "content"):
        if key in value and not isinstance(value[key], str):
            problems.append(f"{where}.{key} is not a string")
    if "annotations" in value and not isinstance(value["annotations"], Mapping):
        problems.append(f"{where}.annotations is not an object")
    digest = value.get("digest")
    if "digest" in value:
        if not isinstance(digest, Mapping) or not digest:
            problems.append(f"{where}.digest is not a non-empty object")
        else:
            for algorithm, hex_value in digest.items():
                wanted = _HEX_LENGTHS.get(algorithm)
                if not isinstance(hex_value, str) or not _HEX.fullmatch(hex_value):
                    problems.append(f"{where}.digest.{algorithm} is not lowercase hex")
                elif wanted is not None and len(hex_value) != wanted:
                    problems.append(f"{where}.digest.{algorithm} has {len(hex_value)} hex "
                                    f"digits, not {wanted}")
    return problems


def _string_list_problems(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return [f"{where} is not a list of strings"]
    return []


def _predicate_problems(predicate: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    if predicate.get("result") not in RESULTS:
        problems.append(f"predicate.result is {predicate.get('result')!r}, not one of "
                        f"{', '.join(RESULTS)}")
    configuration = predicate.get("configuration")
    if not isinstance(configuration, list):
        problems.append("predicate.configuration is missing or not a list")
    else:
        for i, item in enumerate(configuration):
            problems += _descriptor_problems(item, f"predicate.configuration[{i}]",
                                             digest_required=False)
    if "url" in predicate and not isinstance(predicate["url"], str):
        problems.append("predicate.url is not a string")
    for key in ("passedTests", "warnedTests", "failedTests"):
        if key in predicate:
            problems += _string_list_problems(predicate[key], f"predicate.{key}")
    if predicate.get("result") == "PASSED" and (
        predicate.get("warnedTests") or predicate.get("failedTests")
    ):
        problems.append("predicate.result is PASSED but warnedTests or failedTests is not "
                        "empty")
    return problems


def statement_problems(statement: Any) -> list[str]:
    """Every way ``statement`` departs from Statement v1 with a test-result v0.1 predicate."""
    if not isinstance(statement, Mapping):
        return ["the statement is not a JSON object"]
    problems: list[str] = []
    if statement.get("_type") != STATEMENT_TYPE:
        problems.append(f"_type is {statement.get('_type')!r}, not {STATEMENT_TYPE!r}")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not subjects:
        problems.append("subject is missing or empty")
    else:
        for i, subject in enumerate(subjects):
            problems += _descriptor_problems(subject, f"subject[{i}]", digest_required=True)
    if statement.get("predicateType") != PREDICATE_TYPE:
        problems.append(f"predicateType is {statement.get('predicateType')!r}, not "
                        f"{PREDICATE_TYPE!r}")
    predicate = statement.get("predicate")
    if not isinstance(predicate, Mapping):
        problems.append("predicate is missing or not an object")
    else:
        problems += _predicate_problems(predicate)
    return problems
