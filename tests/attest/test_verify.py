"""``verify``: a statement matches this installation, or the first difference is named.

Each way to tamper (the store's code, the catalogue, the statement itself, the
signature) is made for real here and must turn an accepted statement into a rejected one.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from attest_reports import conforming

from chongming_conformance.attest import attestation, build_statement, verify_statement
from chongming_conformance.attest import digests as digests_module
from chongming_conformance.attest.command import main as command_main
from chongming_conformance.attest.digests import BY_RECORD, subject_of
from chongming_conformance.attest.signing import open_envelope
from chongming_conformance.attest.statement import RUN_NAME, configuration_entry


def _attested(
    doc: dict[str, Any], store_package: Callable[[], Path]
) -> tuple[Path, dict[str, Any]]:
    package = store_package()
    statement = build_statement(conforming(doc, f"{package.name}:make_store"))
    assert verify_statement(statement) is None
    return package, statement


def test_one_byte_of_the_store_code_changed_is_named(
    memory_report: dict[str, Any], store_package: Callable[[], Path]
) -> None:
    package, statement = _attested(memory_report, store_package)
    source = package / "__init__.py"
    data = bytearray(source.read_bytes())
    data[-2] ^= 0x01
    source.write_bytes(bytes(data))
    problem = verify_statement(statement)
    assert problem is not None
    assert f"subject {package.name!r} (package files) differs: {package.name}/__init__.py " \
           "changed" in problem


def test_a_file_added_to_or_removed_from_the_store_is_named(
    memory_report: dict[str, Any], store_package: Callable[[], Path]
) -> None:
    package, statement = _attested(memory_report, store_package)
    (package / "later.py").write_text("X = 1\n")
    assert f"{package.name}/later.py is new" in str(verify_statement(statement))
    (package / "later.py").unlink()
    (package / "extra.txt").unlink()
    assert f"{package.name}/extra.txt is gone" in str(verify_statement(statement))


def test_another_store_named_at_verify_time_is_refused(
    memory_report: dict[str, Any], store_package: Callable[[], Path]
) -> None:
    _, statement = _attested(memory_report, store_package)
    other = store_package()
    problem = verify_statement(statement, f"{other.name}:make_store")
    assert problem is not None and "is not what is installed here" in problem


def test_a_changed_catalogue_is_refused(
    memory_report: dict[str, Any], store_package: Callable[[], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, statement = _attested(memory_report, store_package)
    edited = copy.deepcopy(statement)
    catalogue = edited["predicate"]["configuration"][0]
    catalogue["annotations"]["version"] = "1.7"
    assert "made with catalogue '1.7'" in str(verify_statement(edited))
    # The installed kit's clauses change under the same version number.
    real = digests_module.render_catalogue
    monkeypatch.setattr(digests_module, "render_catalogue",
                        lambda fmt="md": real(fmt).replace("MUST", "SHOULD", 1))
    assert "its clauses differ from the installed kit's" in str(verify_statement(statement))


def _edit_result(s: dict[str, Any]) -> None:
    s["predicate"]["result"] = "WARNED"


def _edit_run(s: dict[str, Any]) -> None:
    entry = configuration_entry(s, RUN_NAME)
    assert entry is not None
    entry["annotations"]["gate"] = "should"  # type: ignore[index]


def _drop_digest(s: dict[str, Any]) -> None:
    del s["subject"][0]["digest"]


def _edit_subject(s: dict[str, Any]) -> None:
    s["subject"][0]["digest"]["sha256"] = "0" * 64


@pytest.mark.parametrize(("edit", "problem"), [
    (_edit_result, "result is WARNED but its tests and run make it PASSED: edited"),
    (_edit_run, "annotations do not match their digest: edited"),
    (_drop_digest, "not an in-toto test-result statement: subject[0] has no digest"),
    (_edit_subject, "differs"),
])
def test_an_edited_statement_is_refused(
    memory_report: dict[str, Any], store_package: Callable[[], Path],
    edit: Callable[[dict[str, Any]], None], problem: str,
) -> None:
    _, statement = _attested(memory_report, store_package)
    edit(statement)
    assert problem in str(verify_statement(statement))


def test_a_failed_result_is_refused_naming_the_failed_clauses(
    broken_report: dict[str, Any]
) -> None:
    problem = verify_statement(build_statement(broken_report))
    assert problem == "the result is FAILED, not PASSED: LENGTH-TEXT"


def test_a_warned_result_passes_only_when_allowed(
    memory_report: dict[str, Any], store_package: Callable[[], Path]
) -> None:
    package = store_package()
    doc = conforming(memory_report, f"{package.name}:make_store")
    next(c for c in doc["clauses"] if c["id"] == "PROTOCOL-KEYWORD-ONLY")["outcome"] = "FAIL"
    statement = build_statement(doc)
    assert verify_statement(statement) == "the result is WARNED, not PASSED: PROTOCOL-KEYWORD-ONLY"
    assert verify_statement(statement, allow_warned=True) is None


def _keypair(directory: Path, name: str) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = directory / f"{name}.pem"
    public = directory / f"{name}.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def test_signed_statement_opens_only_with_its_key_and_untouched(
    memory_report: dict[str, Any], store_package: Callable[[], Path], tmp_path: Path
) -> None:
    private, public = _keypair(tmp_path, "ours")
    _, other_public = _keypair(tmp_path, "theirs")
    package = store_package()
    envelope = attestation(conforming(memory_report, f"{package.name}:make_store"), private)
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert verify_statement(open_envelope(envelope, public)) is None
    with pytest.raises(ValueError, match="does not verify with"):
        open_envelope(envelope, other_public)
    with pytest.raises(ValueError, match=r"give --key PUBLIC\.pem"):
        open_envelope(envelope, None)
    forged = dict(envelope)
    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload["predicate"]["passedTests"].append("FORGED")
    forged["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    with pytest.raises(ValueError, match="does not verify with"):
        open_envelope(forged, public)


def test_verify_command_exit_statuses(
    memory_report: dict[str, Any], store_package: Callable[[], Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    private, public = _keypair(tmp_path, "k")
    package = store_package()
    report = tmp_path / "report.json"
    report.write_text(json.dumps(conforming(memory_report, f"{package.name}:make_store")))
    signed, plain = tmp_path / "signed.json", tmp_path / "plain.json"
    assert command_main("attest", [str(report), "-o", str(plain)]) == 0
    assert command_main("attest", [str(report), "-o", str(signed), "--key", str(private)]) == 0
    assert command_main("verify", [str(plain)]) == 0
    assert command_main("verify", [str(signed), "--key", str(public)]) == 0
    assert command_main("verify", [str(signed)]) == 1
    assert "give --key PUBLIC.pem" in capsys.readouterr().err
    assert command_main("verify", [str(plain), "--key", str(public)]) == 4
    assert command_main("verify", [str(tmp_path / "missing.json")]) == 4
    assert "missing.json: no such file" in capsys.readouterr().err
    (package / "__init__.py").write_text("# changed\n")
    assert command_main("verify", [str(plain)]) == 1
    assert f"{package.name}/__init__.py changed" in capsys.readouterr().err


def _wheel(directory: Path, name: str) -> Path:
    """A minimal pure-Python wheel of package ``name`` (the memory store as its code)."""
    wheel = directory / f"{name}-1.0-py3-none-any.whl"
    code = (Path(__file__).parents[2] / "reference_stores" / "memory.py").read_text()
    info = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{name}/__init__.py", code)
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\n"
                                             "Version: 1.0\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                                          "Root-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/top_level.txt", f"{name}\n")
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def test_an_installed_distribution_is_identified_by_its_record(
    memory_report: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"wheelstore_{tmp_path.name.replace('-', '_')}"
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-index", "--target", str(site), str(_wheel(tmp_path, name))],
                   check=True)
    monkeypatch.syspath_prepend(str(site))
    subject = subject_of(name, "store")
    assert subject is not None
    assert subject.identified_by == BY_RECORD
    assert subject.name == f"pkg:pypi/{name.replace('_', '-')}@1.0"
    assert f"{name}/__init__.py" in subject.files
    assert f"{name}-1.0.dist-info/METADATA" in subject.files
    assert not any(p.endswith(("RECORD", "INSTALLER")) for p in subject.files)
    statement = build_statement(conforming(memory_report, f"{name}:make_store"))
    assert verify_statement(statement) is None
    source = site / name / "__init__.py"
    source.write_bytes(source.read_bytes().replace(b"class ", b"class  ", 1))
    problem = verify_statement(statement)
    assert problem is not None
    assert f"(installed distribution RECORD) differs: {name}/__init__.py changed" in problem


def test_a_key_securesystemslib_cannot_sign_with_is_one_message(
    memory_report: dict[str, Any], tmp_path: Path
) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import dsa

    key = tmp_path / "dsa.pem"
    key.write_bytes(dsa.generate_private_key(2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    with pytest.raises(ValueError, match=r"dsa\.pem: cannot sign with this key"):
        attestation(memory_report, key)
