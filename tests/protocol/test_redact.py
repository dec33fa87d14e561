"""Secret redaction: every provider format, false-positive probes, known values, idempotency,
linear time on adversarial input, and the environment rules.

Fake secrets are assembled at run time (``"ghp_" + ...``) so that no literal in this file
looks like a real secret to a scanner such as GitHub push protection.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
import uuid
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import codec
from protocol.basics import redact
from protocol.basics.redact import KINDS, Redactor, known_secrets, placeholder
from protocol.errors import ErrorInfo
from protocol.plans.results import ModelAnswer, ModelToolCall, ToolResult


def _fill(alphabet: str, length: int) -> str:
    return (alphabet * (length // len(alphabet) + 1))[:length]


def _b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _pem(label: str, lines: int = 3, *, end: bool = True, newline: str = "\n") -> str:
    body = newline.join(_fill("MIIEowIBAAKCAQEAq9Zx+/", 64) for _ in range(lines))
    block = f"-----BEGIN {label}-----{newline}{body}"
    return block + (f"{newline}-----END {label}-----" if end else "")


ALNUM = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY"
GITHUB = "gh" + "p_" + _fill(ALNUM, 36)
KNOWN = "Zq8-" + _fill("wX4vY2", 20)  # a value this process knows as a secret
JWT = ".".join([_b64url('{"alg":"HS256","typ":"JWT"}'), _b64url('{"sub":"1234567890","name":"A"}'),
                _fill("SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", 43)])
RSA = "RSA PRIVATE" + " KEY"

# (kind, secret, the text it sits in, what that text becomes)
FORMATS: list[tuple[str, str]] = [
    ("aws-access-key", "AK" + "IA" + _fill("Q3ZWB7KDN5XHM2PL", 16)),
    ("aws-access-key", "AS" + "IA" + _fill("Q3ZWB7KDN5XHM2PL", 16)),
    ("aws-access-key", "A3" + "TX" + _fill("Q3ZWB7KDN5XHM2PL", 16)),
    ("github-token", GITHUB),
    ("github-token", "gh" + "s_" + _fill(ALNUM, 36)),
    ("github-token", "gh" + "o_" + _fill(ALNUM, 36)),
    ("github-token", "github" + "_pat_" + _fill(ALNUM, 22) + "_" + _fill(ALNUM[::-1], 59)),
    ("gitlab-token", "gl" + "pat-" + _fill("xY3_zW5-vU7t", 20)),
    ("gitlab-token", "gl" + "rt-" + _fill("xY3_zW5-vU7t", 26)),
    ("gitlab-token", "GR13" + "48941" + _fill("xY3_zW5-vU7t", 20)),
    ("anthropic-key", "sk-" + "ant-api03-" + _fill("Ab3_Cd5-Ef7", 93) + "AA"),
    ("anthropic-key", "sk-" + "ant-admin01-" + _fill("Ab3_Cd5-Ef7", 93) + "AA"),
    ("openai-key", "sk-" + _fill(ALNUM, 20) + "T3Blbk" + "FJ" + _fill(ALNUM, 20)),
    ("openai-key", "sk-" + "proj-" + _fill("Ab3_Cd5-Ef7gH", 156)),
    ("openai-key", "sk-" + "svcacct-" + _fill("Ab3_Cd5-Ef7gH", 74)),
    ("slack-token", "xo" + "xb-" + "2634971845-" + "4862015379245-" + _fill(ALNUM, 24)),
    ("slack-token", "xo" + "xp-" + "2634971845-" + _fill(ALNUM, 24)),
    ("slack-token", "xa" + "pp-1-" + "A04AB3CD5EF-" + _fill(ALNUM, 40)),
    ("slack-webhook", "https://hooks.slack.com/" + "services/T0A1B2C3D/B4E5F6G7H/" + _fill(ALNUM, 24)),
    ("jwt", JWT),
    ("jwt", JWT.rsplit(".", 1)[0] + "."),  # unsigned: alg "none"
    ("private-key", _pem(RSA)),
    ("private-key", _pem("OPENSSH PRIVATE" + " KEY")),
    ("private-key", _pem("EC PRIVATE" + " KEY")),
    ("private-key", _pem("PRIVATE" + " KEY")),
    ("private-key", _pem("ENCRYPTED PRIVATE" + " KEY")),
    ("private-key", _pem("PGP PRIVATE" + " KEY BLOCK")),
    ("private-key", _pem(RSA, newline="\\n")),  # as it looks inside a JSON string
    ("private-key", _pem(RSA, end=False)),  # cut short: no END line
    ("private-key", _pem(RSA) [:-7]),  # cut short inside the END line
    ("private-key", f"-----BEGIN {RSA}-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n"
                    + _fill("MIIEowIBAAKCAQEAq9Zx+/", 64) + f"\n-----END {RSA}-----"),
    ("gcp-api-key", "AI" + "za" + _fill("Sy3_Dq5-Fz7", 35)),
    ("huggingface-token", "h" + "f_" + _fill("aBcDeFgHiJkLmNoPqRs", 34)),
    ("stripe-key", "sk" + "_live_" + _fill(ALNUM, 24)),
    ("stripe-key", "rk" + "_test_" + _fill(ALNUM, 99)),
    ("stripe-key", "wh" + "sec_" + _fill(ALNUM, 32)),
]


@pytest.mark.parametrize(("kind", "secret"), FORMATS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(FORMATS)])
@pytest.mark.parametrize("around", ["{}", "value: {} (copied)", "token='{}'", "x={}\n", "\"{}\","])
def test_each_provider_format_is_replaced_by_its_kind(kind: str, secret: str, around: str) -> None:
    redactor = Redactor()
    text = around.format(secret)
    assert redactor.redact(text) == around.format(placeholder(kind))
    assert redactor.kinds(text) == {kind}


@pytest.mark.parametrize(("text", "expected"), [
    ("aws_secret_access_key = " + _fill("wJalrXUtnFEMI/K7MDENG/bPxRfiCY", 40),
     "aws_secret_access_key = [REDACTED:aws-secret-key]"),
    ("AWS_SECRET_ACCESS_KEY=" + _fill("wJalrXUtnFEMI+K7MDENG+bPxRfiCY", 40) + "\n",
     "AWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret-key]\n"),
    ('{"SecretAccessKey": "' + _fill("wJalrXUtnFEMI/K7MDENG/bPxRfiCY", 40) + '"}',
     '{"SecretAccessKey": "[REDACTED:aws-secret-key]"}'),
    ("Authorization: Bearer " + _fill("mF_9.B5f-4.1JqM", 30),
     "Authorization: Bearer [REDACTED:authorization]"),
    ("curl -H 'authorization: basic " + _b64url("user:pass-word-1") + "=' https://x",
     "curl -H 'authorization: basic [REDACTED:authorization]' https://x"),
    ('{"Authorization": "token ' + _fill("abcdef0123", 40) + '"}',
     '{"Authorization": "token [REDACTED:authorization]"}'),
    ("Proxy-Authorization: Bearer " + GITHUB, "Proxy-Authorization: Bearer [REDACTED:authorization]"),
])
def test_context_patterns_replace_the_value_and_keep_the_name(text: str, expected: str) -> None:
    assert Redactor().redact(text) == expected


S = "[REDACTED:secret-value]"
U = "[REDACTED:url-password]"


@pytest.mark.parametrize(("text", "expected"), [
    ("password=hunter2", f"password={S}"),
    ("DB_PASSWORD=s3cr3t-Pa55!\n", f"DB_PASSWORD={S}\n"),
    ("export MYSQL_ROOT_PASSWORD='hunter 2'", f"export MYSQL_ROOT_PASSWORD='{S}'"),
    ('{"password": "hunter2", "user": "ada"}', f'{{"password": "{S}", "user": "ada"}}'),
    ('password: "correct horse battery staple"', f'password: "{S}"'),
    ("  client_secret: 0a1b2c3d4e5f\n", f"  client_secret: {S}\n"),
    ("ACCESS_TOKEN=ya29.a0AfH6SMB", f"ACCESS_TOKEN={S}"),
    ("refresh_token = 'r1-abcdef'", f"refresh_token = '{S}'"),
    ("auth_token: abc123", f"auth_token: {S}"),
    ("x-api-key: 12ab34cd", f"x-api-key: {S}"),
    ("apikey=deadbeef01", f"apikey={S}"),
    ("API_KEY = \"k-123\"", f'API_KEY = "{S}"'),
    ("aws_access_key = AKIA-not-20-chars1", f"aws_access_key = {S}"),
    ("secret_key = 'dev-key-123'", f"secret_key = '{S}'"),
    ("private_key: 0x1f2e3d", f"private_key: {S}"),
    ("credentials=user1:pa55", f"credentials={S}"),
    ("passwd: pa55w0rd", f"passwd: {S}"),
    ("pwd=abc123", f"pwd={S}"),
    ("MYSQL_PWD=abc123", f"MYSQL_PWD={S}"),
    ("SMTP_PASS=abc123", f"SMTP_PASS={S}"),
    ("spring.datasource.password=s3cret", f"spring.datasource.password={S}"),
    ("Server=db;User Id=sa;Password=Pa55w0rd;", f"Server=db;User Id=sa;Password={S};"),
    ("https://api.example/v1?token=abc123&page=2", f"https://api.example/v1?token={S}&page=2"),
    ("'password' => 'p4ss'", f"'password' => '{S}'"),
    ('password := "x1y2z3"', f'password := "{S}"'),
    ('"password": "a\\"b1"', f'"password": "{S}"'),  # an escaped quote inside the value
    ('{"cmd": "login", "args": "{\\"password\\": \\"s3cr3t\\"}"}',
     f'{{"cmd": "login", "args": "{{\\"password\\": \\"{S}\\"}}"}}'),  # JSON inside a JSON string
    ("export PASSWORD=abc123\\nnext", f"export PASSWORD={S}\\nnext"),  # a newline escaped as in JSON
    ("PASSWORD=" + "x" * 2 + "1", f"PASSWORD={S}"),
    ("İstanbul: password=hunter2", f"İstanbul: password={S}"),  # İ lower-cases to two characters
    # connection strings: the password part
    ("postgres://user:password@localhost/db", f"postgres://user:{U}@localhost/db"),
    ("postgresql://app:s3cr3t@db.internal:5432/app?sslmode=require", f"postgresql://app:{U}@db.internal:5432/app"
                                                                       "?sslmode=require"),
    ("mysql://root:p@ss:word@127.0.0.1/x", f"mysql://root:{U}@127.0.0.1/x"),
    ("mongodb+srv://u:p%40ss@cluster0.mongodb.net/db", f"mongodb+srv://u:{U}@cluster0.mongodb.net/db"),
    ("redis://:hunter2@cache:6379/0", f"redis://:{U}@cache:6379/0"),
    ("amqp://guest:guest@localhost:5672/", f"amqp://guest:{U}@localhost:5672/"),
    ("git clone https://ada:token@github.com/org/repo.git", f"git clone https://ada:{U}@github.com/org/repo.git"),
    ("DATABASE_URL='postgres://u:pw1@h/d'", f"DATABASE_URL='postgres://u:{U}@h/d'"),
])
def test_a_secret_named_by_its_key_or_in_a_url_is_replaced_and_the_name_kept(text: str, expected: str) -> None:
    assert Redactor().redact(text) == expected


@pytest.mark.parametrize(("text", "kind"), [
    ("token=" + GITHUB, "github-token"),
    ("GITHUB_TOKEN='" + GITHUB + "'", "github-token"),
    ('"api_key": "' + "sk-" + "proj-" + _fill("Ab3_Cd5-Ef7gH", 40) + '"', "openai-key"),
    ("password=" + JWT, "jwt"),
])
def test_a_providers_token_as_a_named_value_keeps_its_own_kind(text: str, kind: str) -> None:
    assert Redactor().kinds(text) == {kind}


@pytest.mark.parametrize("text", [
    # code: the value is a name, a call, a type, an expression
    "password = os.environ['DB_PASSWORD']",
    "password = request.form.get('password')",
    "token = self.next_token",
    "client = Client(api_key=api_key, token=token)",
    "password: str",
    "token: Optional[str] = None",
    "password: Optional[SecretStr] = Field(default=None)",
    "password = bcrypt.hashpw(pw, salt)",
    "{password: process.env.DB_PASSWORD}",
    "if password == 'abc123':",
    "if token != 'abc123':",
    "pass",
    "token => token.value",
    "std::string token::Token",
    "credentials: 'include'",
    "password: correct horse battery staple",  # an unquoted word reads as a name; quoted, it is redacted
    "secret: true",
    "password: null",
    # names that are not a secret's: the word is not the last one
    "token_count=5",
    "max_tokens: 4096",
    "password_hash = bcrypt(password)",
    "password_min_length: 12",
    "tokenizer=gpt2-4k",
    "keyboard: us-intl",
    "bypass=123",
    "compass: 270deg",
    "PWD=/home/u/project",
    "OLDPWD=/home/u",
    "to\u212aen=abc123",  # a Kelvin sign is no k: names are ASCII
    # references, templates, masks and placeholders
    "password: ${DB_PASSWORD}",
    'password="$PGPASSWORD"',
    "password = '{{ vault_password }}'",
    "password=%(password)s",
    "api_key: <your-api-key>",
    "password: '********'",
    "token = ''",
    "token: 42",
    'eos_token: "</s>"',
    'pad_token: "[PAD]"',
    "WHERE password = :password",
    "postgres://localhost:5432/db",
    "postgres://user@localhost/db",
    'f"postgres://{user}:{password}@{host}/db"',
    "postgres://$USER:$PASSWORD@host/db",
    "http://[::1]:8080/path?a=b@c",
    "ssh://git@github.com:22/org/repo",
    "git@github.com:org/repo.git",
    "see https://example.com/a:b@c/d",
])
def test_names_and_values_that_are_not_secrets_are_left_alone(text: str) -> None:
    assert Redactor().redact(text) == text


@pytest.mark.parametrize("text", [
    "commit " + hashlib.sha1(b"x").hexdigest(),
    "fixed in 3f2a9c1 and 3f2a9c1d4e5b",
    "id " + str(uuid.UUID("920e49ed-2b54-4d2a-8846-1da8dba77eab")),  # fixed: test ids are the same in every run
    "id 01a21b01-e284-74bb-8b92-876e18d8fcfe",  # a UUIDv7, as new_id() makes
    "image@sha256:" + hashlib.sha256(b"x").hexdigest(),
    hashlib.sha256(b"y").hexdigest().upper(),
    hashlib.sha512(b"z").hexdigest(),
    base64.b64encode(b"The quick brown fox jumps over the lazy dog, again and again and again.").decode(),
    base64.b64encode(b'{"alg":"none"}').decode(),
    "see task-sk-list and disk-sk-" + _fill(ALNUM, 30),
    "a skeleton key, skeletons, sk-learn, sk-" + _fill("abcdefgh-ijkl", 30),  # no digit: a name
    "shelf_life = " + "shelf_" + _fill("abcdefghij", 40),
    "AK" + "IA" + "Q3ZWB7KD",
    "AK" + "IA" + _fill("Q3ZWB7KDN5XHM2PL", 17),
    "gh" + "p_token_name = 1",
    "gh" + "p_" + _fill(ALNUM, 35),
    "x" + GITHUB,
    GITHUB + "_suffix",
    GITHUB + "-suffix",
    "eyJ alone, eyJ" + "hbGciOiJIUzI1NiJ9 alone",
    "-----BEGIN PUBLIC KEY-----\n" + _fill("MIIBIjANBgkqhkiG9w0B", 64) + "\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\n" + _fill("MIIDdzCCAl+gAwIBAgIE", 64) + "\n-----END CERTIFICATE-----",
    "pk" + "_live_" + _fill(ALNUM, 24),  # publishable: ships in web pages
    "headers = {'Authorization': f'Bearer {token}'}",
    "Authorization: Bearer $TOKEN",
    "password = os.environ['DB_PASSWORD']",
    "AI" + "za" + _fill("Sy3_Dq5-Fz7", 34),
    "from huggingface_hub import hf_hub_download",
    "glpat-short",
    "[REDACTED:jwt] [REDACTED:known-secret]",
])
def test_look_alikes_are_left_alone(text: str) -> None:
    assert Redactor([KNOWN]).redact(text) == text


def test_an_unknown_placeholder_kind_is_not_a_placeholder() -> None:
    text = "[REDACTED:" + GITHUB + "]"
    assert Redactor().redact(text) == "[REDACTED:[REDACTED:github-token]]"


def test_a_pem_header_glued_to_a_token_still_ends_it() -> None:
    text = GITHUB + _pem(RSA) + "\n" + GITHUB
    assert Redactor().redact(text) == "[REDACTED:github-token][REDACTED:private-key]\n[REDACTED:github-token]"


def test_a_truncated_pem_block_stops_at_the_prose_after_its_body() -> None:
    text = _pem(RSA, end=False) + "\n(output truncated)\nHere is the rest."
    assert Redactor().redact(text) == "[REDACTED:private-key]\n(output truncated)\nHere is the rest."


# -- known values ---------------------------------------------------------------------------


def test_a_known_value_is_replaced_wherever_it_appears() -> None:
    redactor = Redactor([KNOWN])
    assert redactor.redact(f"url=https://u:{KNOWN}@host/x{KNOWN}y") == (
        "url=https://u:[REDACTED:known-secret]@host/x[REDACTED:known-secret]y")
    assert redactor.kinds(f"a {KNOWN}") == {"known-secret"}


def test_overlapping_known_values_become_one_placeholder() -> None:
    redactor = Redactor(["abcdefgh12", "gh12345678"])
    assert redactor.redact("xabcdefgh12345678y") == "x[REDACTED:known-secret]y"


def test_known_values_shorter_than_the_minimum_are_ignored() -> None:
    assert Redactor(["1234567", "", "abc"]).redact("1234567 abc") == "1234567 abc"


def test_a_known_value_next_to_a_token_lets_the_token_be_found() -> None:
    assert Redactor([KNOWN]).redact(GITHUB + KNOWN) == "[REDACTED:github-token][REDACTED:known-secret]"


def test_a_known_value_is_not_found_inside_a_placeholder() -> None:
    assert Redactor(["REDACTED"]).redact("[REDACTED:jwt] REDACTED") == "[REDACTED:jwt] [REDACTED:known-secret]"


# -- idempotency and the fast scan (properties) -----------------------------------------------

_FRAGMENTS = [
    GITHUB, "gh" + "p_", _fill(ALNUM, 36), "sk-", "sk-" + "ant-api03-", "eyJ", _b64url('{"a":1}'), ".",
    f"-----BEGIN {RSA}-----", f"-----END {RSA}-----", "-----BEGIN ", "------", "-----", "\n", "\\n",
    _fill("MIIEowIBAAKCAQEAq9Zx", 20), "AB==", "AK" + "IA", "Q3ZWB7KDN5XHM2PL", " ", "_", "-", "/", "+", "=",
    '"', ":", "[REDACTED:jwt]", "[REDACTED:", "]", "aws_secret_access_key=", "SECRET-ACCESS", "Key: ",
    _fill("wJalrXUtnFEMI/K7MDENG", 40), "Authorization: Bearer ", "xo" + "xb-", "h" + "f_", _fill("abcd", 34),
    "AI" + "za", _fill("Sy3_Dq5", 35), "https://hooks.slack.com/services/", "T0/B0/xyz12345", "sk" + "_live_",
    _fill("a1", 24), "gl" + "pat-", "github" + "_pat_", _fill("Ab_", 82), KNOWN, KNOWN[:9], KNOWN[5:],
    "password", "PASSWORD=", "db_pass: ", "pwd=", "PWD=", '"token": "', "'", "\\\"", "secret", "api_key",
    "apiKey", "passecret", "token", " => ", ":=", "x1y", "abc", "${", "://", "://u:", "@", "p@ss", "%40", "?",
]
_TEXT = st.lists(st.sampled_from(_FRAGMENTS) | st.text(alphabet="aZ0_-.=:/+[]\n ", max_size=6),
                 max_size=16).map("".join)


@settings(max_examples=1500, deadline=None)
@given(text=_TEXT)
def test_redaction_is_idempotent_and_leaves_no_known_value(text: str) -> None:
    redactor = Redactor([KNOWN])
    once = redactor.redact(text)
    assert redactor.redact(once) == once
    assert KNOWN not in once


@settings(max_examples=1000, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=4), padding=st.integers(0, 700))
def test_the_encoded_prefilter_never_skips_a_value_the_walk_would_change(texts: list[str], padding: int) -> None:
    """redact_value skips the walk when the value's encoding holds no marker, context word or
    known value: it must give what the walk gives, whatever the strings (long ones too,
    which _starts prefilters by substring)."""
    redactor = Redactor([KNOWN])
    long = "x" * padding + texts[0]
    value = ToolResult(key=texts[0][:40], tool="read_file", ok=True, output=long, path="\n".join(texts),
                       error=ErrorInfo(code="ACODE-SBX-001", message=texts[-1]))
    walked = redactor._value(value)
    assert redactor.redact_value(value) == walked
    assert redactor.redact_value({"k": texts, texts[-1]: [long]}) == redactor._value({"k": texts, texts[-1]: [long]})
    if walked is not value:  # (clean may also say no when nothing changes: it is a prefilter)
        assert not redactor.clean(codec.encode(value))


def _scan_every_position(text: str) -> str:
    """What the marker-driven scan must equal: try the combined pattern at every position."""
    pieces: list[str] = []
    pos = i = 0
    while i < len(text):
        scanner = redact._scanners().after_secret if i == pos and pieces else redact._scanners().scan
        match = scanner.match(text, i)
        if match is None:
            i += 1
            continue
        pieces += [text[pos:i], redact._replacement(match, None)]
        pos = i = match.end()
    return "".join(pieces) + text[pos:] if pieces else text


@settings(max_examples=1500, deadline=None)
@given(text=_TEXT)
def test_scanning_only_where_markers_start_finds_what_scanning_everywhere_finds(text: str) -> None:
    assert redact._replace_patterns(text, None) == _scan_every_position(text)


# -- linear time ------------------------------------------------------------------------------

MB = 1_000_000
_ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "sk- run": lambda n: _fill("sk-", n),
    "sk- spaced": lambda n: _fill("sk- ", n),
    "eyJ run": lambda n: _fill("eyJ", n),
    "eyJ spaced": lambda n: _fill("eyJ ", n),
    "jwt heads": lambda n: _fill("eyJ" + "aaaaa.eyJbbbbb.", n),
    "pem without end": lambda n: f"-----BEGIN {RSA}-----" + "A" * n,
    "pem headers": lambda n: _fill(f"-----BEGIN {RSA}----- ", n),
    "pem headers and lines": lambda n: _fill(f"-----BEGIN {RSA}-----\n" + "A" * 64 + "\n", n),
    "one letter": lambda n: "a" * n,
    "one dash": lambda n: "-" * n,
    "ghp_ spaced": lambda n: _fill("gh" + "p_ ", n),
    "AKIA run": lambda n: _fill("AK" + "IA", n),
    "aws name then spaces": lambda n: "aws_secret_access_key=" + " " * n,
    "aws names": lambda n: _fill("aws_secret_access_key= ", n),
    "authorization headers": lambda n: _fill("Authorization: Bearer ", n),
    "open placeholders": lambda n: _fill("[REDACTED:jwt", n),
    "placeholders": lambda n: _fill("[REDACTED:jwt] ", n),
    "known value prefix": lambda n: _fill(KNOWN[:-1] + "#", n),
    "known values": lambda n: _fill(KNOWN + " ", n),
    "password names": lambda n: _fill("password=", n),
    "password names then a bracket": lambda n: _fill("password=", n - 1) + "(",
    "password names spaced": lambda n: _fill("password= ", n),
    "open quoted values": lambda n: _fill('password="x1', n),
    "open single-quoted values": lambda n: _fill("db_pass='a1 token=\\\"", n),
    "key names": lambda n: _fill("api_key:", n),
    "key words": lambda n: _fill("key", n),
    "url starts": lambda n: _fill("://a:", n),
    "url without an at": lambda n: "://a:" + "b" * n,
    "url ats": lambda n: "://a:" + _fill("b@", n),
}


def _benign(n: int) -> str:
    line = (f"    commit {hashlib.sha1(b'x').hexdigest()} id {uuid.uuid4()} digest sha256:"
            f"{hashlib.sha256(b'x').hexdigest()}\n    return {{'skeleton': True, 'shelf_life': 30}}  # task-sk-list\n"
            f"    {base64.b64encode(b'ordinary words in base64, nothing secret here').decode()}\n")
    return _fill(line, n)


def _seconds(redactor: Redactor, text: str, repeat: int = 3, enough: float = 0.0) -> float:
    """The CPU seconds of this thread one redaction takes (the best of ``repeat``): work
    done, not wall time, so other processes on the machine (tests run in parallel) do not
    move the ratios these tests compare. A run under ``enough`` ends the measuring early:
    the best of all ``repeat`` would be under it too, so a bound checked against the result
    holds or fails as it would after every run (a passing input costs one run, not three)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        redactor.redact(text)
        best = min(best, time.thread_time() - started)
        if best < enough:
            break
    return best


@pytest.mark.parametrize("name", list(_ADVERSARIAL))
def test_work_grows_linearly_with_adversarial_input(name: str) -> None:
    # 8x the input should cost about 8x the time; quadratic work would cost 64x.
    redactor = Redactor([KNOWN])
    make = _ADVERSARIAL[name]
    small = _seconds(redactor, make(MB // 16))
    large = _seconds(redactor, make(MB // 2), enough=24 * max(small, 1e-4))
    assert large < 24 * max(small, 1e-4), f"{name}: {small * 1e3:.1f} ms → {large * 1e3:.1f} ms"


def test_a_megabyte_of_adversarial_input_costs_at_most_20_times_benign_input() -> None:
    redactor = Redactor([KNOWN])
    benign = _seconds(redactor, _benign(MB))
    costs = {name: _seconds(redactor, make(MB), repeat=2, enough=20 * benign) for name, make in _ADVERSARIAL.items()}
    slow = {name: f"{cost / benign:.1f}x" for name, cost in costs.items() if cost > 20 * benign}
    assert not slow, f"benign 1 MB took {benign * 1e3:.1f} ms; slower inputs: {slow}"


# -- values -----------------------------------------------------------------------------------


def test_redact_value_rebuilds_structs_of_the_same_type_and_keeps_what_is_clean() -> None:
    redactor = Redactor([KNOWN])
    clean = ToolResult(key="k", tool="read_file", ok=True, output="nothing here")
    assert redactor.redact_value(clean) is clean
    dirty = ToolResult(key="k", tool="read_file", ok=False, output=f"token={GITHUB}",
                       error=ErrorInfo(code="ACODE-SBX-005", message=f"bad {KNOWN}"), exit_code=1)
    redacted = redactor.redact_value(dirty)
    assert type(redacted) is ToolResult
    assert redacted.output == "token=[REDACTED:github-token]"
    assert redacted.error == ErrorInfo(code="ACODE-SBX-005", message="bad [REDACTED:known-secret]")
    assert (redacted.key, redacted.exit_code, redacted.ok) == ("k", 1, False)


def test_redact_value_walks_lists_tuples_and_dict_keys_and_values() -> None:
    answer = ModelAnswer(content="ok", tool_calls=[ModelToolCall(
        id="c1", name="write_file", arguments={"path": "a.env", KNOWN: [1, (f"x {GITHUB}", b"raw"), None]})])
    redacted = Redactor([KNOWN]).redact_value(answer)
    assert redacted.tool_calls[0].arguments == {
        "path": "a.env", "[REDACTED:known-secret]": [1, ("x [REDACTED:github-token]", b"raw"), None]}
    assert answer.tool_calls[0].arguments["path"] == "a.env"  # the original is untouched


def test_every_kind_has_a_placeholder_that_is_kept_as_it_is() -> None:
    text = " ".join(placeholder(kind) for kind in sorted(KINDS))
    assert Redactor([KNOWN]).redact(text) == text
    assert len(KINDS) == 17


# -- the environment ----------------------------------------------------------------------------


def test_known_secrets_picks_secret_names_and_real_looking_values() -> None:
    env = {
        "OPENAI_API_KEY": "  sk-local-0123456789  ",
        "AWS_ACCESS_KEY_ID": "AK" + "IA" + "Q3ZWB7KDN5XHM2PL",
        "DB_PASSWORD": "hunter2-hunter2",
        "MY_OAUTH_CLIENT": "c1i3nt-s3cr3t",
        "CI_JOB_JWT": "j.w.t-0123456789",
        "AZURE_CLIENT_SECRET": "az-0123456789",
        "MYSQL_PWD": "my-5ql-pa55",
        # not secrets
        "GOOGLE_APPLICATION_CREDENTIALS": "/home/u/creds.json",
        "AWS_SHARED_CREDENTIALS_FILE": "/home/u/.aws/credentials",
        "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.1234",
        "PASSWORD_STORE_DIR": "/home/u/.password-store",
        "GIT_AUTHOR_NAME": "Ada Lovelace-Byron",
        "GNOME_KEYRING_CONTROL": "/run/user/1000/keyring",
        "TOKENIZERS_PARALLELISM": "false",
        "API_TOKEN_TIMEOUT": "30",
        "SECRET_COUNT": "123456789",
        "POSTGRES_PASSWORD": "postgres",
        "SHORT_TOKEN": "abc123",
        "PWD": "/home/u/project-secret-key",
        "HOME": "/home/u",
        "PATH": "/usr/bin",
    }
    assert known_secrets(env) == sorted(["sk-local-0123456789", "AK" + "IA" + "Q3ZWB7KDN5XHM2PL", "hunter2-hunter2",
                                         "c1i3nt-s3cr3t", "j.w.t-0123456789", "az-0123456789", "my-5ql-pa55"])


@pytest.fixture
def fresh_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_default", None)
    monkeypatch.setattr(redact, "_extra", set())


@pytest.mark.usefixtures("fresh_default")
def test_the_default_redactor_knows_the_environments_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_API_TOKEN", KNOWN)
    assert redact.redact(f"deploying with {KNOWN}") == "deploying with [REDACTED:known-secret]"
    assert redact.default_redactor() is redact.default_redactor()


@pytest.mark.usefixtures("fresh_default")
def test_configure_adds_secrets_from_config_to_the_default() -> None:
    value = "cfg-" + _fill("secret9", 16)
    assert redact.redact(value) == value
    redact.configure([value, "short"])
    assert redact.redact(f"{value} short") == "[REDACTED:known-secret] short"
    assert redact.redact_value([value]) == ["[REDACTED:known-secret]"]


_PLAIN = re.compile("|".join(re.escape(m) for m in redact._MARKER_TEXTS))  # what the trie replaced


@given(st.lists(st.sampled_from([*redact._MARKER_TEXTS, *(m[:-1] for m in redact._MARKER_TEXTS), "x", " ", "_",
                                 "-", "g", "é"]), max_size=12).map("".join))
@settings(max_examples=400)
def test_the_marker_trie_finds_what_the_plain_alternation_finds(text: str) -> None:
    assert [(m.start(), m.group()) for m in redact._MARKERS.finditer(text)] == \
        [(m.start(), m.group()) for m in _PLAIN.finditer(text)]
    assert (redact._MARKERS_IN_BYTES.search(text.encode()) is None) == (_PLAIN.search(text) is None)


def test_no_marker_is_a_prefix_of_another() -> None:
    """The trie stops at the end of a literal: a longer one sharing it would never match."""
    markers = redact._MARKER_TEXTS
    assert [(a, b) for a in markers for b in markers if a != b and b.startswith(a)] == []
