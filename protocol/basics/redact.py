"""Secret redaction: one pass over text that replaces secrets with ``[REDACTED:<kind>]``.

Two sources of secrets, redacted in this order:

1. **Known values**: the exact values of this process's secrets (:func:`known_secrets`
   picks them out of the environment; :func:`configure` adds ones from config), kind
   ``known-secret``. Values shorter than :data:`MIN_KNOWN_LENGTH` are ignored: redacting
   them would blank out ordinary text.
2. **Provider patterns**, one kind each::

    aws-access-key     AKIA ASIA ABIA ACCA A3T[A-Z0-9] + 16 [A-Z0-9]  (20 chars)
    aws-secret-key     40+ base64 chars, only after a secret_access_key name and = or :
    github-token       ghp_ gho_ ghu_ ghs_ ghr_ + 36+ alnum; github_pat_ + 82+ [A-Za-z0-9_]
    gitlab-token       glpat- gldt- glrt- glcbt- glptt- glft- glimt- glagent- glsoat-
                       gloas- glffct- glwt- + 20+ token chars; GR1348941 + 20+
    anthropic-key      sk-ant-<word><2 digits>- + 20+ token chars  (api03, admin01, oat01)
    openai-key         sk- (not sk-ant-) + 20+ token chars with a digit among them
                       (covers sk-proj-, sk-svcacct-, sk-admin- and legacy keys)
    slack-token        xoxa- xoxb- xoxp- xoxo- xoxr- xoxs- xoxe- xoxe.xoxp- xapp- + 10+
    slack-webhook      https://hooks.slack.com/services|workflows|triggers/…
    jwt                eyJ….eyJ….<signature, maybe empty>
    private-key        -----BEGIN … PRIVATE KEY----- through its -----END … line; with
                       no whole END line, through the base64 lines that follow the BEGIN
                       line and what is left of the END line
    gcp-api-key        AIza + 35 token chars
    huggingface-token  hf_ + 34+ alnum
    stripe-key         sk_live_ sk_test_ rk_live_ rk_test_ + 24+ alnum; whsec_ + 32+ alnum
    authorization      the credential after ``Authorization: Bearer|Basic|Token``
    secret-value       the value after a name that ends in password, passwd, passphrase,
                       secret, token, credential(s), api/access/secret/private/account/
                       encryption/signing/master + key (``_``, ``-`` or nothing between),
                       pass after ``_ . -``, pwd there or as the whole name but the
                       shell's ``PWD`` (any case; any prefix: ``DB_PASSWORD``,
                       ``x-api-key``); then = : := or =>, the name and the value maybe
                       quoted (``"password": "…"``, ``KEY=value``)
    url-password       the password of a URL's user-info: ``scheme://user:…@host``

   Token characters are letters, digits, ``_`` and ``-`` (but not the ``-`` that starts
   ``-----BEGIN``, so a PEM header glued to a token stays a PEM header). The token patterns
   are anchored: they neither start right after a token character nor end right before
   one, so they never match inside a longer token. Known values match anywhere, inside
   tokens too. The context patterns (``aws-secret-key``, ``authorization``, ``secret-value``,
   ``url-password``) replace only the value and keep the name; a provider's token as the
   value of a name is named by its own kind (``token=[REDACTED:github-token]``).
   :meth:`Redactor.redact_value` redacts every string inside a wire value; bytes are left
   alone.

Decisions:

- Not redacted: git SHAs, UUIDs, digests (no pattern matches hex or UUID shapes); Stripe
  ``pk_`` keys (publishable: they ship in web pages); PEM public keys and certificates.
- A named value (``secret-value``) is the code the model must read as often as a secret, so
  it is redacted only when it looks like one: 3 or more characters, not only letters,
  ``_``, ``.`` and ``-`` (``password = password``, ``token = self.token``, ``token: str``,
  ``password = os.environ[...]``, ``credentials: "include"`` stay; a random token or a
  password nearly always has a digit or a symbol: ``password=hunter2``), and not starting
  with ``$ % { < * [ :`` (``${DB_PASS}``, ``{{ vault }}``, ``<your-key>``, ``****``, ``[PAD]``,
  ``:param``). An unquoted value ends at a space, quote, bracket, ``,``, ``;`` or ``&``;
  the name must end in its word, so ``token_count=5``, ``max_tokens: 4096`` and
  ``password_hash = bcrypt(...)`` stay, and ``PWD``/``OLDPWD`` (the shell's directory) too.
  Not covered: a value after a space only (``--password hunter2``, ``.netrc``), a plain
  word (``password: letmein``). A URL's password is redacted whatever it is, unless a
  template (``{password}``, ``$PASS``, ``%s``, ``<pw>``, ``****``).
- Idempotent, ``redact(redact(x)) == redact(x)``: an existing placeholder is atomic (text
  on either side of it is redacted on its own; the placeholder grammar names only the
  kinds above), and the place right after a replaced secret counts as a token boundary, as
  the placeholder's ``]`` will on the next pass.
- Known secrets from the environment (:func:`known_secrets`): a variable whose name contains
  KEY, TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL, AUTH or JWT (AUTHOR,
  KEYBOARD, KEYRING, KEYMAP and TOKENIZER do not count), or one of the well-known cloud
  names, unless its last ``_`` part says it holds a location (FILE, PATH, DIR, SOCK, URL,
  HOST, …) or it is GOOGLE_APPLICATION_CREDENTIALS (a path to the secret, not the secret).
  Paths are excluded by name, not by value: an AWS secret key may start with ``/``. A value
  is skipped when it is shorter than 8 chars, a boolean word, digits only under 12 chars,
  or letters only under 12 chars (``postgres``, ``changeme``: redacting such a word would
  blank out every use of it).
- Linear time: every unbounded repetition is possessive, and every pattern starts with a
  marker (a literal prefix; for the context patterns, their name in any case), anchored
  where it is a token pattern, so a character is scanned a bounded number of times
  whatever the input. The combined pattern is tried only where a marker starts (found by
  one scan of plain literals, which ``re`` does fast) or a secret's name may (its last
  word found with ``str.find`` in the lower-cased text, then checked for a separator after
  it); known values are found with ``str.find``, one scan per value. On 1 MB, benign text
  takes some 35 ms; the worst adversarial input measured (``"sk- " * n``) about 8 times
  that. Source code, with its many names (``token = …``), costs about 1.4 times what it did
  before names were redacted.

Size: one design in one module: the scan's linear time rests on each pattern's marker, so
the patterns, the markers built from them and the scan that finds them are read together;
this docstring, the specification of every kind, is a sixth of the file.
"""

from __future__ import annotations

import functools
import os
import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeVar, cast

import msgspec

__all__ = [
    "KINDS",
    "MIN_KNOWN_LENGTH",
    "Redactor",
    "configure",
    "default_redactor",
    "known_secrets",
    "placeholder",
    "placeholders_in",
    "redact",
    "redact_value",
]

T = TypeVar("T")

#: Shorter known values are ignored.
MIN_KNOWN_LENGTH = 8

_KNOWN = "known-secret"
_GITLAB = ("pat", "dt", "rt", "cbt", "ptt", "ft", "imt", "agent", "soat", "oas", "ffct", "wt")

# A token character: a letter, digit, "_", or a "-" that does not start a PEM header.
_DASH = r"-(?!----BEGIN )"
_TC = rf"(?:[A-Za-z0-9_]|{_DASH})"
_START = r"(?<![A-Za-z0-9_\-])"  # a token pattern starts after no token character…
_END = rf"(?![A-Za-z0-9_]|{_DASH})"  # …and ends before none


def _ci(word: str) -> str:
    """``word`` matched ASCII-case-insensitively (``(?i)`` would also match ``ſ`` for ``s``)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


_PEM_LABEL = r"(?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY_LINE = r"(?:[A-Za-z0-9+/]{16,}+=*+|[A-Za-z0-9+/]++=++|(?:Proc-Type|DEK-Info|Comment):[^\r\n\\]*+)"
_PEM_SEPARATOR = r"(?:\s|\\[nrt])*+"  # whitespace, or a newline escaped as in JSON
_NAME_SEPARATOR = r"[\"']?\s*+[:=]\s*+[\"']?"  # between a name and its value, maybe quoted


# A key that names a secret, by its last word (any prefix: DB_PASSWORD, client_secret,
# x-api-key, spring.datasource.password), followed by = : := or => (not == or ::). "pass"
# and "pwd" count only after _ . or - (DB_PASS, MYSQL_PWD) or, for pwd, as a whole key other
# than the shell's PWD; none of the words is a suffix of another, so two never overlap.
_SECRET_NAME = (
    rf"(?:{_ci('passw')}(?:{_ci('or')})?{_ci('d')}|{_ci('passphrase')}|{_ci('secret')}|{_ci('token')}"
    rf"|{_ci('credential')}[sS]?"
    rf"|(?:{_ci('api')}|{_ci('access')}|{_ci('secret')}|{_ci('private')}|{_ci('account')}|{_ci('encryption')}"
    rf"|{_ci('signing')}|{_ci('master')})[_\-]?{_ci('key')}"
    rf"|(?<=[_.\-]){_ci('pass')}|(?:(?<=[_.\-])|(?<![A-Za-z0-9_.\-])(?!PWD)){_ci('pwd')})"
    r"(?=(?:\\?[\"'])?[ \t]*+(?::=|=>|=(?!=)|:(?![:=])))"
)
_SKIP = r"(?![$%{<*\[:])"  # a reference, template, mask or placeholder: ${DB_PASS}, {{ x }}, <your-key>, ***


def _quoted(quote: str, escaped: bool) -> str:
    """A value between ``quote``s (``\\"`` if ``escaped``, as inside a JSON string): 3 or
    more characters, not only letters, ``_``, ``.`` and ``-``."""
    if escaped:
        chars = rf"[^{quote}\\\r\n]"
        return (rf"(?<=\\{quote}){_SKIP}(?={chars}{{3}})(?=[A-Za-z_.\-]*+[^A-Za-z_.\-{quote}\\])"
                rf"{chars}*+(?=\\{quote})")
    chars = rf"(?:[^{quote}\\\r\n]|\\.)"  # a backslash escapes the character after it
    return (rf"(?<=(?<!\\){quote}){_SKIP}(?={chars}{{3}})(?=[A-Za-z_.\-]*+[^A-Za-z_.\-{quote}])"
            rf"{chars}*+(?={quote})")


_BARE = r"[^\s\"'`,;&<>(){}\[\]\\]"  # an unquoted value runs to a space, quote, , ; & or bracket
_VALUES = "|".join([_quoted('"', True), _quoted('"', False), _quoted("'", True), _quoted("'", False),
                    rf"(?<![\"']){_SKIP}(?={_BARE}{{3}})(?=[A-Za-z_.\-]*+[^A-Za-z_.\-\s\"'`,;&<>(){{}}\[\]\\])"
                    rf"{_BARE}++"])
_SECRET_VALUE = rf"{_SECRET_NAME}(?:\\?[\"'])?[ \t]*+(?::=|=>|=|:)[ \t]*+(?:\\?[\"'])?(?P<v>{_VALUES})"


class _Kind(NamedTuple):
    """A pattern and the literal markers every one of its matches starts with."""

    markers: tuple[str, ...]
    pattern: str


#: kind → markers and pattern. Order matters only between patterns that can start at the
#: same place (``sk-ant-`` before ``sk-``). A ``v`` group is the part replaced; without
#: one, the whole match is. The context patterns' markers are words: see :data:`_WORDS`.
_KINDS: dict[str, _Kind] = {
    "private-key": _Kind(("-----BEGIN ",), (
        rf"-----BEGIN {_PEM_LABEL}(?:(?:[^-]|-(?!----))*+-----END {_PEM_LABEL}"
        rf"|(?:{_PEM_SEPARATOR}{_PEM_BODY_LINE})*+(?:{_PEM_SEPARATOR}-----END(?: [A-Z]++)*+-*+)?)")),
    "aws-access-key": _Kind(("A3T", "AKIA", "ASIA", "ABIA", "ACCA"),
                            rf"{_START}(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{{16}}{_END}"),
    "aws-secret-key": _Kind((), (
        rf"(?:{_ci('aws')}[_\-]?)?{_ci('secret')}[_\-]?{_ci('access')}[_\-]?{_ci('key')}"
        rf"{_NAME_SEPARATOR}(?P<v>[A-Za-z0-9/+=]{{40,}}+)")),
    "github-token": _Kind(("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
                          rf"{_START}(?:gh[pousr]_[A-Za-z0-9]{{36,}}+|github_pat_[A-Za-z0-9_]{{82,}}+){_END}"),
    "gitlab-token": _Kind((*(f"gl{prefix}-" for prefix in _GITLAB), "GR1348941"),
                          rf"{_START}(?:gl(?:{'|'.join(_GITLAB)})-|GR1348941){_TC}{{20,}}+"),
    "anthropic-key": _Kind(("sk-",), rf"{_START}sk-ant-[a-z]{{2,10}}[0-9]{{2}}-{_TC}{{20,}}+"),
    "openai-key": _Kind(("sk-",),
                        rf"{_START}sk-(?!ant-)(?=(?:[A-Za-z_]|{_DASH})*+[0-9]){_TC}{{20,}}+"),
    "slack-token": _Kind(("xox", "xapp-"), (
        rf"{_START}(?:xox[aboprs]|xoxe(?:\.xox[bp])?|xapp)-(?:[A-Za-z0-9]|{_DASH}){{10,}}+{_END}")),
    "slack-webhook": _Kind(("https://hooks.slack.com/",), (
        rf"{_START}https://hooks\.slack\.com/(?:services|workflows|triggers)/(?:[A-Za-z0-9/_]|{_DASH}){{8,}}+")),
    "jwt": _Kind(("eyJ",), rf"{_START}eyJ{_TC}{{5,}}+\.eyJ{_TC}{{5,}}+\.{_TC}*+"),
    "gcp-api-key": _Kind(("AIza",), rf"{_START}AIza{_TC}{{35}}{_END}"),
    "huggingface-token": _Kind(("hf_",), rf"{_START}hf_[A-Za-z0-9]{{34,}}+{_END}"),
    "stripe-key": _Kind(("sk_", "rk_", "whsec_"), (
        rf"{_START}(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{{24,}}+|whsec_[A-Za-z0-9]{{32,}}+){_END}")),
    "secret-value": _Kind((), _SECRET_VALUE),
    "url-password": _Kind(("://",), r"://[^\s/?#@:\"'<>\\]*+:(?P<v>(?![{$%<*\[])[^\s/?#\"'<>\\]+)@"),
    "authorization": _Kind((), (
        rf"{_ci('authorization')}{_NAME_SEPARATOR}(?:{_ci('bearer')}|{_ci('basic')}|{_ci('token')})[ \t]++"
        rf"(?P<v>(?:[A-Za-z0-9._~+/]|{_DASH}){{8,}}+=*+)")),
}

#: Every kind a placeholder may name.
KINDS: frozenset[str] = frozenset((_KNOWN, *_KINDS))

_PLACEHOLDER = re.compile(r"\[REDACTED:(?:" + "|".join(sorted(map(re.escape, KINDS))) + r")\]")


def _compile(anchored: bool) -> tuple[re.Pattern[str], dict[str, tuple[str, str | None]]]:
    """One alternation: placeholders first (kept as they are), then every kind; without
    the leading token-boundary check if not ``anchored``."""
    groups: dict[str, tuple[str, str | None]] = {}
    parts = [f"(?P<keep>{_PLACEHOLDER.pattern})"]
    for index, (kind, (_, pattern)) in enumerate(_KINDS.items()):
        if not anchored:
            pattern = pattern.removeprefix(_START)
        value = f"v{index}" if "(?P<v>" in pattern else None
        if value:
            pattern = pattern.replace("(?P<v>", f"(?P<{value}>")
        groups[f"k{index}"] = (kind, value)
        parts.append(f"(?P<k{index}>{pattern})")
    return re.compile("|".join(parts)), groups


class _Scanners(NamedTuple):
    #: Tried only where a marker starts: a match can start nowhere else.
    scan: re.Pattern[str]
    #: Tried right after a replaced secret, which counts as a token boundary.
    after_secret: re.Pattern[str]
    #: Each kind's group name -> (kind, the group of the value it replaces, if not all).
    groups: dict[str, tuple[str, str | None]]


@functools.cache
def _scanners() -> _Scanners:
    """The two combined patterns, compiled at the first text with a marker, not at import:
    compiling them takes some 5 ms, and every process imports this module (through
    :mod:`protocol.errors`) while many, a CLI command among them, never redact anything."""
    scan, groups = _compile(anchored=True)
    after_secret, _ = _compile(anchored=False)
    return _Scanners(scan, after_secret, groups)


def _literals(texts: Iterable[str]) -> str:
    """A pattern matching exactly the literals ``texts`` (none a prefix of another), as a
    trie: ``g(?:h(?:o_|p_)|l…)`` rather than ``gho_|ghp_|gl…``. ``re`` tries the
    alternatives of a plain alternation one by one at every place where their first
    character is; the trie decides each character once (2-6 times faster on text with many
    such places: 3 KB of a script's JSON 47 -> 24 us, 1 KB of "g" 139 -> 23 us)."""
    tree: dict[str, Any] = {}
    for text in texts:
        node = tree
        for char in text:
            node = node.setdefault(char, {})
        node[""] = {}  # a literal ends here

    def emit(node: dict[str, Any]) -> str:
        if "" in node:
            return ""
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items())]
        return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"

    return emit(tree)


#: Plain literals, so ``re`` skips ahead by first character instead of trying every
#: alternative at every position. finditer does not report a marker that starts inside an
#: earlier one; every such marker belongs to an anchored pattern, which cannot start there
#: (a marker's last character is a token character).
_MARKER_TEXTS = tuple(sorted({marker for kind in _KINDS.values() for marker in kind.markers} | {"[REDACTED:"}))
_MARKER_PATTERN = _literals(_MARKER_TEXTS)
_MARKERS = re.compile(_MARKER_PATTERN)
_MARKERS_IN_BYTES = re.compile(_MARKER_PATTERN.encode())  # the markers are ASCII
#: The words the context patterns (:data:`_WORDS`) start with, ASCII lower case.
_WORD_BYTES = (b"secret", b"authorization")
#: The other last words of a secret's name (:data:`_SECRET_NAME`, loosely: a superset), each
#: with its separator; one regex each, whose literal start ``re`` finds fast.
_NAMES_IN_BYTES = tuple((word, re.compile(word + rb"[a-z]{0,6}(?:\\?[\"'])?[ \t]*+[:=]"))
                        for word in (b"pass", b"pwd", b"token", b"key", b"credential"))
_encoder = msgspec.msgpack.Encoder()
#: Markers whose every pattern needs a token boundary before it.
_ANCHORED = frozenset(marker for kind in _KINDS.values() for marker in kind.markers
                      if all(other.pattern.startswith(_START) for other in _KINDS.values()
                             if marker in other.markers))
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
#: The context patterns start with a word in any case; offsets from the word back to where
#: a match may start ("aws_secret_access_key": 4 before "secret").
_WORDS: tuple[tuple[re.Pattern[str], tuple[int, ...]], ...] = (
    (re.compile(_ci("secret") + r"[_\-]?" + _ci("access")), (0, 3, 4)),
    (re.compile(_ci("authorization")), (0,)),
)
#: The words a secret's name ends with (:data:`_SECRET_NAME`), lower case, and how far before
#: each a match may start (``api_key``: 4 before ``key``). Found in the lower-cased text with
#: ``str.find``, far faster than a scan for the name pattern itself.
_NAME_WORDS: dict[str, tuple[int, ...]] = {
    "pass": (0,), "pwd": (0,), "token": (0,), "secret": (0,), "credential": (0,), "key": (3, 4, 6, 7, 8, 10, 11)}
_NAMES = re.compile(_SECRET_NAME)
_NAME_END = re.compile(r"[a-z]{0,6}(?:\\?[\"'])?[ \t]*+[:=]")  # the rest of a name (password), and = or :


def placeholders_in(text: str) -> Counter[str]:
    """How often each placeholder (``[REDACTED:<kind>]``) occurs in ``text``."""
    return Counter(_PLACEHOLDER.findall(text)) if "[REDACTED:" in text else Counter()


def placeholder(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


class Redactor:
    """Redacts known secret values and provider patterns from text and wire values.

    Immutable once built; safe to share between threads.
    """

    def __init__(self, known: Iterable[str] = ()):
        values = {value for value in known if len(value) >= MIN_KNOWN_LENGTH}
        self._known: tuple[str, ...] = tuple(sorted(values, key=lambda v: (-len(v), v)))
        self._known_bytes = tuple(value.encode("utf-8", "surrogatepass") for value in self._known)

    def __repr__(self) -> str:
        return f"Redactor(<{len(self._known)} known values>)"

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by its placeholder (``text`` itself if none)."""
        return self._redact(text, None)

    def kinds(self, text: str) -> set[str]:
        """The kinds :meth:`redact` replaces in ``text``."""
        found: set[str] = set()
        self._redact(text, found)
        return found

    def redact_value(self, obj: T) -> T:
        """``obj`` with every string in it redacted: str, list, tuple, dict (keys too) and
        msgspec Structs (a new Struct of the same type, through ``msgspec.structs.replace``).
        Other values, bytes included, come back as they are; so does an unchanged value,
        itself rather than a copy."""
        if not isinstance(obj, str):
            try:
                encoded = _encoder.encode(obj)
            except (TypeError, ValueError, msgspec.EncodeError):
                encoded = None  # not a wire value: walked below
            if encoded is not None and self.clean(encoded):
                return obj  # the common case, decided by a few scans in C instead of a walk
        return cast(T, self._value(obj))  # _value keeps each value's type (a Struct: its own class)

    def clean(self, encoded: bytes) -> bool:
        """True when the strings in ``encoded`` have nothing to redact: no marker, context
        word (ASCII, any case; a name's last word followed by = or :) or known value appears
        anywhere in it. ``encoded`` holds every string as its UTF-8 bytes: a value's msgpack
        encoding, or strings joined by NUL (no marker, word or known value holds one). A
        redaction can only start at one of these, so a match in any string shows here. False
        may still mean nothing to redact."""
        if _MARKERS_IN_BYTES.search(encoded) is not None:  # one scan (a trie: see _literals)
            return False
        if any(value in encoded for value in self._known_bytes):
            return False
        lowered = encoded.lower()
        return not any(word in lowered for word in _WORD_BYTES) and \
            not any(word in lowered and name.search(lowered) for word, name in _NAMES_IN_BYTES)

    # -- internals ------------------------------------------------------------------------

    def _value(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self._redact(obj, None)
        if isinstance(obj, msgspec.Struct):
            changes = {}
            for name in obj.__struct_fields__:
                value = getattr(obj, name)
                new = self._value(value)
                if new is not value:
                    changes[name] = new
            return msgspec.structs.replace(obj, **changes) if changes else obj
        if isinstance(obj, (list, tuple)):
            items = [self._value(item) for item in obj]
            if all(new is old for new, old in zip(items, obj, strict=True)):
                return obj
            return items if isinstance(obj, list) else tuple(items)
        if isinstance(obj, dict):
            pairs = [(self._value(key), self._value(value)) for key, value in obj.items()]
            if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, obj.items(), strict=True)):
                return obj
            return dict(pairs)
        return obj

    def _redact(self, text: str, found: set[str] | None) -> str:
        if "[REDACTED:" not in text:
            out = self._segment(text, found)
        else:
            # Existing placeholders are atomic: the text between them is redacted on its own.
            pieces: list[str] = []
            pos = 0
            for match in _PLACEHOLDER.finditer(text):
                pieces += [self._segment(text[pos:match.start()], found), match.group()]
                pos = match.end()
            pieces.append(self._segment(text[pos:], found))
            out = "".join(pieces)
        return text if out == text else out

    def _segment(self, text: str, found: set[str] | None) -> str:
        if not text:
            return text
        if self._known:
            text = self._replace_known(text, found)
        return _replace_patterns(text, found)

    def _replace_known(self, text: str, found: set[str] | None) -> str:
        spans: list[tuple[int, int]] = []
        for value in self._known:
            start = text.find(value)
            while start >= 0:
                spans.append((start, start + len(value)))
                start = text.find(value, start + len(value))
        if not spans:
            return text
        if found is not None:
            found.add(_KNOWN)
        spans.sort()
        merged: list[list[int]] = []
        for start, stop in spans:
            if merged and start < merged[-1][1]:  # overlaps the previous one: one placeholder
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([start, stop])
        pieces: list[str] = []
        pos = 0
        for start, stop in merged:
            pieces += [text[pos:start], placeholder(_KNOWN)]
            pos = stop
        pieces.append(text[pos:])
        return "".join(pieces)


def _starts(text: str) -> tuple[list[int], set[int]]:
    """Where a match may start, in order, and apart from them the places where one may start
    only right after a replaced secret (an anchored marker after a token character)."""
    starts: list[int] = []
    blocked: set[int] = set()
    for match in _MARKERS.finditer(text):  # one scan (a trie: see _literals)
        start = match.start()
        if start and text[start - 1] in _TOKEN_CHARS and match.group() in _ANCHORED:
            blocked.add(start)  # the anchored scan's lookbehind would refuse it; checking here is cheaper
        else:
            starts.append(start)
    words = [match.start() - offset for word, offsets in _WORDS for match in word.finditer(text)
             for offset in offsets if match.start() >= offset]
    words += _name_starts(text)
    if words:
        starts = sorted({*starts, *words})
    return starts, blocked


def _name_starts(text: str) -> list[int]:
    """Where a secret's name (:data:`_SECRET_NAME`) may start: before each of its words in
    ``text`` lower-cased, overlapping ones too (``passecret``). A character whose
    lower case is longer (``İ``) shifts the positions: such text is scanned for the name."""
    lowered = text.lower()
    if len(lowered) != len(text):
        return [match.start() for match in _NAMES.finditer(text)]
    starts: list[int] = []
    for word, offsets in _NAME_WORDS.items():  # str.find: a fast C scan per word
        at = lowered.find(word)
        while at >= 0:
            if _NAME_END.match(lowered, at + len(word)):  # only a name a separator follows
                starts += [at - offset for offset in offsets if at >= offset]
            at = lowered.find(word, at + 1)
    return starts


def _replace_patterns(text: str, found: set[str] | None) -> str:
    """Replace every pattern match, scanning left to right: what ``_scanners().scan.sub`` would do,
    except that the place right after a replaced secret counts as a token boundary."""
    starts, blocked = _starts(text)
    if not starts:
        return text
    scanners = _scanners()
    pieces: list[str] = []
    pos = 0
    for start in starts:
        if start < pos:
            continue
        match = (scanners.after_secret if start == pos and pieces else scanners.scan).match(text, start)
        while match is not None:
            pieces += [text[pos:match.start()], _replacement(match, found)]
            pos = match.end()
            match = scanners.after_secret.match(text, pos) if pos in blocked else None
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def _replacement(match: re.Match[str], found: set[str] | None) -> str:
    group = match.lastgroup
    if group is None or group == "keep":
        return match.group()
    kind, value = _scanners().groups[group]
    if kind == "secret-value" and value is not None:  # a provider's token as the value: that kind
        inner = _scanners().scan.fullmatch(match.string, *match.span(value))
        if inner is not None and inner.lastgroup not in (None, "keep", group):
            kind = _scanners().groups[inner.lastgroup][0]
    if found is not None:
        found.add(kind)
    if value is None:
        return placeholder(kind)
    offset = match.start()
    start, stop = match.span(value)
    return match.string[offset:start] + placeholder(kind) + match.string[stop:match.end()]


# -- known secrets in the environment ------------------------------------------------------

_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "AUTH", "JWT")
_BENIGN_WORDS = re.compile(r"AUTHOR|KEYBOARD|KEYRING|KEYMAP|TOKENIZER")
#: A last ``_`` part saying the variable holds where a secret is, or who, not the secret.
_LOCATION_PARTS = frozenset({"FILE", "PATH", "DIR", "SOCK", "SOCKET", "URL", "URI", "HOST", "PORT",
                             "ENDPOINT", "REGION", "USER", "USERNAME", "NAME", "EMAIL", "TYPE", "MODE"})
_CLOUD_NAMES = frozenset({
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PASSWORD", "AZURE_STORAGE_KEY",
    "ARM_CLIENT_SECRET", "ARM_ACCESS_KEY", "GOOGLE_API_KEY", "MYSQL_PWD",
})
_NOT_SECRET_NAMES = frozenset({"GOOGLE_APPLICATION_CREDENTIALS", "SSH_AUTH_SOCK", "PWD", "OLDPWD"})
_BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null", "enabled", "disabled"})


def _secret_name(name: str) -> bool:
    upper = name.upper()
    if upper in _CLOUD_NAMES:
        return True
    if upper in _NOT_SECRET_NAMES or upper.rsplit("_", 1)[-1] in _LOCATION_PARTS:
        return False
    words = _BENIGN_WORDS.sub(" ", upper)
    return any(word in words for word in _SECRET_WORDS)


def _secret_value(value: str) -> bool:
    if len(value) < MIN_KNOWN_LENGTH or value.lower() in _BOOLEAN_WORDS:
        return False
    if value.isdigit() and len(value) < 12:
        return False
    return not (value.isascii() and value.isalpha() and len(value) < 12)


def known_secrets(environ: Mapping[str, str]) -> list[str]:
    """The values in ``environ`` that are secrets (stripped of surrounding whitespace),
    by the rules in the module docstring, sorted and without duplicates."""
    values = {value.strip() for name, value in environ.items() if _secret_name(name)}
    return sorted(value for value in values if _secret_value(value))


# -- the process-wide default --------------------------------------------------------------

_default: Redactor | None = None
_extra: set[str] = set()


def default_redactor() -> Redactor:
    """This process's redactor: the secrets in ``os.environ`` (read on first use) and every
    value given to :func:`configure`."""
    global _default
    if _default is None:
        _default = Redactor([*known_secrets(os.environ), *_extra])
    return _default


def configure(extra_known: Iterable[str]) -> Redactor:
    """Add secrets from config to this process's redactor and return it; values shorter
    than :data:`MIN_KNOWN_LENGTH` are ignored. Each process calls it for itself."""
    global _default
    _extra.update(value.strip() for value in extra_known)
    _default = Redactor([*known_secrets(os.environ), *_extra])
    return _default


def redact(text: str) -> str:
    """:meth:`Redactor.redact` with :func:`default_redactor`."""
    return default_redactor().redact(text)


def redact_value(obj: T) -> T:
    """:meth:`Redactor.redact_value` with :func:`default_redactor`."""
    return default_redactor().redact_value(obj)
