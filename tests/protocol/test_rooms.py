"""Protocol's rooms import one way: basics → errors → calls, policy, transport → plans →
sessions → schema, with the messages and the codec on top.

Read from the source with :mod:`ast` (every import, at the top, in a function or under
``TYPE_CHECKING``), so a lazy import that runs up the rooms fails here too. A room may
import itself and any room below it. ``errors`` stays a top-level module (DESIGN names
it) but is placed among the rooms: it runs the basics' redaction over every message, and
every room above may raise its errors. The tools' room (calls) and the session's limits
(policy) import none of each other; no room imports the messages or the codec.
"""

from __future__ import annotations

from pathlib import Path

import protocol
from tests.rooms import upward

PROTOCOL = Path(protocol.__file__).parent
_BASE = {"basics", "errors"}
# each room, and the rooms beneath it that it may import
BELOW = {
    "basics": set[str](),
    "errors": {"basics"},
    "calls": _BASE,
    "policy": _BASE,
    "transport": _BASE,
    "plans": _BASE | {"calls", "policy"},
    "sessions": _BASE | {"calls", "policy", "plans"},
    "schema": _BASE | {"calls", "policy", "plans", "sessions"},
}
MODULES_AMONG_ROOMS = {"errors"}


def test_each_room_of_the_protocol_imports_only_itself_and_the_rooms_beneath_it() -> None:
    assert sorted(p.name for p in PROTOCOL.iterdir() if (p / "__init__.py").exists()) == sorted(
        set(BELOW) - MODULES_AMONG_ROOMS)
    assert sorted(p.stem for p in PROTOCOL.glob("*.py")) == ["__init__", "codec", "errors", "messages"]
    assert upward(PROTOCOL, "protocol", BELOW) == []


def test_an_import_up_the_rooms_or_across_calls_and_policy_is_found(tmp_path: Path) -> None:
    """The check itself: the basics importing the errors, errors importing a plan, the
    policy importing a tool, a session importing the messages, a lazy one included."""
    root = tmp_path / "protocol"
    for room in set(BELOW) - MODULES_AMONG_ROOMS:
        (root / room).mkdir(parents=True)
        (root / room / "__init__.py").write_text('"""A room."""\n')
    (root / "errors.py").write_text("from protocol.basics.redact import redact\nfrom protocol.plans import plan\n")
    (root / "basics" / "redact.py").write_text("def f():\n    from protocol.errors import ConfigError\n")
    (root / "policy" / "budget.py").write_text("from protocol.calls.tools import Risk\n")
    (root / "sessions" / "events.py").write_text("from protocol import messages\n")
    (root / "plans" / "results.py").write_text("from protocol.calls import tools\nfrom protocol.errors import E\n")
    assert upward(root, "protocol", BELOW) == ["protocol.basics.redact imports protocol.errors",
                                                "protocol.errors imports protocol.plans",
                                                "protocol.policy.budget imports protocol.calls.tools",
                                                "protocol.sessions.events imports protocol"]
