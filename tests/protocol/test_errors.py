"""Error codes and the exception tree: stable codes, and errors rebuilt after crossing processes."""

from __future__ import annotations

import re

import pytest

from protocol import errors
from protocol.basics import redact
from protocol.errors import (
    CODES,
    AcodeError,
    CycleLimitReached,
    ErrorInfo,
    ModelError,
    NotFoundError,
    PathEscapeError,
    RequestTimeout,
    SandboxError,
    StageTimeout,
    TransitionError,
    TransportError,
    from_info,
)


def _exception_classes() -> list[type[AcodeError]]:
    found: list[type[AcodeError]] = [AcodeError]
    for cls in found:
        found.extend(sub for sub in cls.__subclasses__() if sub.__module__ == errors.__name__)
    return found


CLASSES = _exception_classes()


@pytest.mark.parametrize(
    ("code", "cls", "builtin"),
    [
        ("ACODE-SBX-002", PathEscapeError, PermissionError),
        ("ACODE-NET-001", RequestTimeout, TimeoutError),
        ("ACODE-ORCH-002", StageTimeout, TimeoutError),
        ("ACODE-ORCH-003", CycleLimitReached, Exception),
        ("ACODE-ORCH-006", TransitionError, ValueError),
        ("ACODE-STORE-002", NotFoundError, LookupError),
        ("ACODE-NET-002", TransportError, ConnectionError),
        ("ACODE-SBX-005", SandboxError, Exception),
        ("ACODE-LLM-004", ModelError, Exception),
    ],
)
def test_from_info_rebuilds_the_class_of_the_code(code: str, cls: type[AcodeError], builtin: type) -> None:
    err = from_info(ErrorInfo(code=code, message="it went wrong"))
    assert type(err) is cls
    assert isinstance(err, builtin)
    assert err.code == code
    assert err.message == "it went wrong"


def test_from_info_gives_a_plain_acode_error_for_an_unknown_area() -> None:
    err = from_info(ErrorInfo(code="ACODE-WHAT-001", message="from a newer acode"))
    assert type(err) is AcodeError
    assert err.code == "ACODE-WHAT-001"
    assert str(err) == "from a newer acode (ACODE-WHAT-001)"


def test_from_info_gives_a_plain_acode_error_for_a_code_without_an_area() -> None:
    err = from_info(ErrorInfo(code="E42", message="odd"))
    assert type(err) is AcodeError
    assert err.code == "E42"


def test_from_info_keeps_the_retryable_flag_it_was_sent() -> None:
    assert from_info(ErrorInfo(code="ACODE-NET-002", message="lost", retryable=False)).retryable is False
    assert from_info(ErrorInfo(code="ACODE-SBX-006", message="slow", retryable=True)).retryable is True


def test_str_of_an_error_is_its_message_then_its_code() -> None:
    err = PathEscapeError("path '../etc/passwd' resolves outside the workspace /w")
    assert str(err) == "path '../etc/passwd' resolves outside the workspace /w (ACODE-SBX-002)"


def test_an_explicit_code_overrides_the_class_default() -> None:
    err = SandboxError("no such file 'a.py'", code="ACODE-SBX-003")
    assert err.code == "ACODE-SBX-003"
    assert str(err) == "no such file 'a.py' (ACODE-SBX-003)"


def test_info_and_from_info_round_trip_an_error() -> None:
    sent = RequestTimeout("no reply from sandbox within 5.0s", retryable=False)
    back = from_info(sent.info())
    assert (type(back), back.code, back.message, back.retryable) == (RequestTimeout, "ACODE-NET-001",
                                                                     sent.message, False)


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_is_well_formed_and_rebuilds_into_its_area(code: str) -> None:
    assert re.fullmatch(r"ACODE-[A-Z]+-\d{3}", code)
    assert CODES[code]  # every code has its one-line meaning
    err = from_info(ErrorInfo(code=code, message="m"))
    assert type(err) is not AcodeError
    assert type(err).default_code.split("-")[1] == code.split("-")[1]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_default_code_is_a_known_code(cls: type[AcodeError]) -> None:
    assert cls.default_code in CODES


@pytest.mark.parametrize("cls", [c for c in CLASSES if c is not AcodeError], ids=lambda cls: cls.__name__)
def test_an_error_raised_with_its_default_code_comes_back_as_the_same_class(cls: type[AcodeError]) -> None:
    assert type(from_info(cls("m").info())) is cls


def test_the_tree_in_the_module_docstring_names_every_class() -> None:
    assert errors.__doc__ is not None
    assert sorted(c.__name__ for c in CLASSES) == sorted(
        name for name in re.findall(r"([A-Z][A-Za-z]+)\(", errors.__doc__))


GITHUB = "gh" + "p_" + "aB3dE5fG7h" * 3 + "J9kL2m"
KNOWN = "Zq8-" + "wX4vY2" * 4  # the value of a secret in the environment


def test_an_error_message_is_redacted_when_the_error_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_default", None)
    monkeypatch.setenv("DEPLOY_API_TOKEN", KNOWN)
    err = SandboxError(f"command 'curl -u x:{KNOWN} {GITHUB}' could not start", code="ACODE-SBX-005")
    expected = "command 'curl -u x:[REDACTED:known-secret] [REDACTED:github-token]' could not start"
    assert err.message == expected
    assert str(err) == f"{expected} (ACODE-SBX-005)"
    assert err.args == (expected,)
    assert err.info() == ErrorInfo(code="ACODE-SBX-005", message=expected)


def test_an_error_rebuilt_from_a_peers_info_is_redacted_too() -> None:
    err = from_info(ErrorInfo(code="ACODE-LLM-001", message=f"provider refused key {GITHUB}"))
    assert (type(err), err.message) == (ModelError, "provider refused key [REDACTED:github-token]")
