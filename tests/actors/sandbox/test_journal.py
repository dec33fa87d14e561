"""The idempotency protocol: new, done and every pending case, with a real in-memory journal."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from actors.sandbox.journal import Journal
from actors.sandbox.tools.terminal import Terminal
from protocol.calls.tools import risk_of
from protocol.errors import RequestTimeout
from protocol.messages import BeginToolCall, Message, RunTool
from protocol.sessions.events import ToolCalled
from tests.actors.sandbox.conftest import Tree
from tests.actors.sandbox.journal_actor import MemoryJournal


@pytest.fixture
def memory() -> MemoryJournal:
    return MemoryJournal()


@pytest.fixture
def journal(memory: MemoryJournal) -> Iterator[Journal]:
    terminal = Terminal()
    yield Journal(memory.answer, terminal)
    terminal.kill_all()


def _request(tree: Tree, tool: str, key: str = "k1", **arguments: Any) -> RunTool:
    return RunTool(key=key, session_id="s1", workspace=str(tree.root), tool=tool, arguments=arguments)


def _interrupted(memory: MemoryJournal, request: RunTool, pre_image: str | None) -> None:
    """Journal an intent with no result, as a sandbox killed mid-call leaves it."""
    memory.answer(BeginToolCall(key=request.key, session_id=request.session_id, tool=request.tool,
                                arguments=request.arguments, risk=risk_of(request.tool), pre_image=pre_image))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_new_call_runs_and_is_journaled_with_its_event(journal: Journal, memory: MemoryJournal, tree: Tree) -> None:
    result = journal.run(_request(tree, "write_file", path="hello.py", content="print('hi')\n"))
    assert (result.ok, result.output, result.path, result.risk) == (True, "wrote 12 bytes to hello.py", "hello.py",
                                                                    "write")
    assert memory.entries["k1"].begin.pre_image == "absent"
    assert memory.entries["k1"].result == result and result.sha256 == _sha(b"print('hi')\n")  # journaled with it
    [event] = memory.events
    assert isinstance(event, ToolCalled)
    assert (event.key, event.tool, event.target, event.ok, event.summary, event.outcome) == (
        "k1", "write_file", "hello.py", True, "wrote 12 bytes to hello.py", "done")


def test_a_done_call_is_replayed_without_running(journal: Journal, memory: MemoryJournal, tree: Tree) -> None:
    request = _request(tree, "write_file", path="a.txt", content="first")
    first = journal.run(request)
    (tree.root / "a.txt").write_text("changed by someone else")
    again = journal.run(request)
    assert again.replayed and not first.replayed
    assert again.output == first.output
    assert (tree.root / "a.txt").read_text() == "changed by someone else"
    assert len(memory.events) == 1


def test_a_pending_read_runs_again(journal: Journal, memory: MemoryJournal, tree: Tree) -> None:
    request = _request(tree, "read_file", path="src/a.py")
    _interrupted(memory, request, None)
    result = journal.run(request)
    assert (result.ok, result.output, result.outcome) == (True, "     1\tprint('inside')\n", "done")


def test_a_pending_write_already_applied_is_done_without_writing(
        journal: Journal, memory: MemoryJournal, tree: Tree) -> None:
    request = _request(tree, "write_file", path="a.txt", content="new")
    _interrupted(memory, request, "absent")
    (tree.root / "a.txt").write_text("new")  # the interrupted run got as far as the rename
    inode = (tree.root / "a.txt").stat().st_ino
    result = journal.run(request)
    assert result.ok
    assert result.output == "wrote 3 bytes to a.txt (already written before an interruption; not written again)"
    assert result.sha256 == _sha(b"new")  # what the run would have said: the executor's edit_undone check reads it
    assert (tree.root / "a.txt").stat().st_ino == inode


def test_a_pending_write_not_yet_applied_runs(journal: Journal, memory: MemoryJournal, tree: Tree) -> None:
    (tree.root / "a.txt").write_text("old")
    request = _request(tree, "write_file", path="a.txt", content="new")
    _interrupted(memory, request, _sha(b"old"))
    assert journal.run(request).ok
    assert (tree.root / "a.txt").read_text() == "new"


@pytest.mark.parametrize("tool", ["write_file", "modify_file"])
def test_a_pending_write_whose_file_changed_otherwise_has_an_unknown_outcome(
        journal: Journal, memory: MemoryJournal, tree: Tree, tool: str) -> None:
    (tree.root / "a.txt").write_text("third party")
    arguments: dict[str, Any] = ({"content": "new"} if tool == "write_file"
                                 else {"edits": [{"search": "third", "replace": "first"}]})
    request = _request(tree, tool, path="a.txt", **arguments)
    _interrupted(memory, request, _sha(b"old"))
    result = journal.run(request)
    assert (result.ok, result.outcome) == (False, "unknown")
    assert result.error is not None and result.error.code == "ACODE-SBX-008"
    assert result.error.message == (
        f"{tool} 'a.txt' was interrupted before its result was recorded; it may or may not have taken effect "
        f"(pre-image sha256 {_sha(b'old')}, now {_sha(b'third party')}); check the workspace before retrying")
    assert (tree.root / "a.txt").read_text() == "third party"
    assert memory.events[0].outcome == "unknown"  # type: ignore[union-attr]


def test_a_pending_modify_with_the_file_unchanged_runs(journal: Journal, memory: MemoryJournal, tree: Tree) -> None:
    (tree.root / "m.txt").write_text("a = 1\n")
    request = _request(tree, "modify_file", path="m.txt", edits=[{"search": "1", "replace": "2"}])
    _interrupted(memory, request, _sha(b"a = 1\n"))
    assert journal.run(request).ok
    assert (tree.root / "m.txt").read_text() == "a = 2\n"


def test_a_pending_command_is_never_run_again(journal: Journal, memory: MemoryJournal, tree: Tree) -> None:
    request = _request(tree, "run_terminal", command="touch ran.txt")
    _interrupted(memory, request, None)
    result = journal.run(request)
    assert (result.ok, result.outcome, result.risk) == (False, "unknown", "execute")
    assert result.error is not None and result.error.message == (
        "run_terminal 'touch ran.txt' was interrupted before its result was recorded; it may or may not have "
        "taken effect (a command has no pre-image); check the workspace before retrying")
    assert not (tree.root / "ran.txt").exists()


def test_refusals_are_journaled_results(journal: Journal, memory: MemoryJournal, tree: Tree) -> None:
    unknown = journal.run(_request(tree, "rm_rf", key="k1"))
    assert unknown.error is not None and unknown.error.message == (
        "tool 'rm_rf' is not available; available: create_directory, list_directory, modify_file, read_file, "
        "run_terminal, search_code, write_file")
    assert unknown.risk == "destructive"
    bad = journal.run(_request(tree, "read_file", key="k2", path=7))
    assert bad.error is not None and bad.error.code == "ACODE-SBX-007"
    assert bad.error.message.startswith("arguments of read_file rejected: Expected `str`, got `int` - at `$.path`")
    outside = journal.run(_request(tree, "read_file", key="k3", path="../outside/canary.txt"))
    assert outside.error is not None and outside.error.code == "ACODE-SBX-002"
    assert [e.ok for e in memory.events] == [False, False, False]  # type: ignore[union-attr]


def test_a_persistence_failure_raises_instead_of_answering(tree: Tree) -> None:
    def unreachable(body: Message) -> Message:
        raise RequestTimeout("no reply from persistence within 30s", code="ACODE-NET-001")

    with pytest.raises(RequestTimeout):
        Journal(unreachable, Terminal()).run(_request(tree, "write_file", path="a.txt", content="x"))
    assert not (tree.root / "a.txt").exists()


@pytest.mark.parametrize(("tool", "arguments"), [
    ("read_file", {"path": "src/a.py"}), ("list_directory", {"path": "."}), ("search_code", {"query": "inside"}),
    ("search_code_terms", {"queries": ["inside", "print"]}), ("diff_workspace", {})])
def test_a_call_without_side_effects_journals_no_intent_but_its_result_and_replays_it(
        journal: Journal, memory: MemoryJournal, tree: Tree, tool: str, arguments: dict[str, Any]) -> None:
    sent: list[Message] = []
    recording = Journal(lambda request: sent.append(request) or memory.answer(request), journal._terminal)
    first = recording.run(_request(tree, tool, **arguments))
    assert [type(m).__name__ for m in sent] == ["FinishToolCall"]  # one round trip to persistence, no intent
    assert memory.entries["k1"].result == first  # the result is journaled, as every result is
    (tree.root / "src" / "a.py").write_text("changed\n")
    again = recording.run(_request(tree, tool, **arguments))
    assert again.replayed and again.output == first.output  # a replayed stage sees the bytes it saw
    assert len(memory.events) == 1


@pytest.mark.parametrize(("tool", "arguments"), [
    ("write_file", {"path": "b.txt", "content": "x"}), ("modify_file", {"path": "src/a.py", "edits": [
        {"search": "inside", "replace": "out"}]}), ("create_directory", {"path": "d"}), ("run_terminal", {
            "command": "true"})])
def test_a_call_with_side_effects_journals_its_intent_first(
        journal: Journal, memory: MemoryJournal, tree: Tree, tool: str, arguments: dict[str, Any]) -> None:
    sent: list[Message] = []
    recording = Journal(lambda request: sent.append(request) or memory.answer(request), journal._terminal)
    recording.run(_request(tree, tool, **arguments))
    assert [type(m).__name__ for m in sent] == ["BeginToolCall", "FinishToolCall"]


def test_what_the_stage_held_rides_on_a_reads_journal_write_and_precedes_a_side_effect(
        memory: MemoryJournal, tree: Tree) -> None:
    """RunTool.commit: journaled with a read's result (one request, one transaction); sent
    on its own, and answered, before a call with side effects is even begun."""
    from protocol.messages import Commit, Committed, FinishToolCall
    from protocol.sessions.events import TurnAnswered

    sent: list[Message] = []

    def send(body: Message) -> Message:
        sent.append(body)
        return Committed() if isinstance(body, Commit) else memory.answer(body)

    terminal = Terminal()
    try:
        journal = Journal(send, terminal)
        turn = TurnAnswered(id="t1", session_id="s1", at=1.0, visit=1, task="T1", step="S1", turn=1)
        held = Commit(session_id="s1", events=[turn])
        (tree.root / "a.txt").write_text("alpha\n")
        read = journal.run(msgspec.structs.replace(_request(tree, "read_file", path="a.txt"), commit=held))
        assert read.ok and [type(body) for body in sent] == [FinishToolCall]
        assert isinstance(sent[0], FinishToolCall) and sent[0].commit == held and sent[0].rerun_safe
        sent.clear()
        write = journal.run(msgspec.structs.replace(_request(tree, "write_file", key="k2", path="b.txt", content="b"),
                                                    commit=held))
        assert write.ok and [type(body) for body in sent] == [Commit, BeginToolCall, FinishToolCall]
        first, last = sent[0], sent[2]
        assert isinstance(first, Commit) and first.events == [turn]
        assert isinstance(last, FinishToolCall) and last.commit is None
    finally:
        terminal.kill_all()


def test_the_tools_a_stage_treats_as_rerun_safe_are_those_the_sandbox_journals_without_an_intent(tree: Tree) -> None:
    """StageContext sends held writes with a call named in RERUN_SAFE_TOOLS, trusting the
    sandbox to journal them with its result; the sandbox decides by the decoded call."""
    from actors.sandbox.dispatch import ToolCall
    from protocol.calls.tools import RERUN_SAFE_TOOLS

    valid: dict[str, dict[str, Any]] = {"read_file": {"path": "a"}, "list_directory": {}, "search_code": {"query": "q"},
             "search_code_terms": {"queries": ["q"]}, "diff_workspace": {}, "write_file": {"path": "a", "content": ""},
             "create_directory": {"path": "d"}, "run_terminal": {"command": "true"}, "baseline_workspace": {}}
    for tool, arguments in valid.items():
        with ToolCall(_request(tree, tool, **arguments)) as call:
            assert call.refusal is None, (tool, call.refusal)
            assert call.rerun_safe == (tool in RERUN_SAFE_TOOLS), tool
    assert RERUN_SAFE_TOOLS <= set(valid)


def test_a_held_read_writes_nothing_and_answers_its_event(journal: Journal, memory: MemoryJournal,
                                                          tree: Tree) -> None:
    """RunTool.held: the stage journals the result itself, with its next write."""
    (tree.root / "a.txt").write_text("alpha\n")
    request = msgspec.structs.replace(_request(tree, "read_file", path="a.txt"), held=True)
    result, event = journal.run_call(request)
    assert result.ok and result.output.endswith("alpha\n")
    assert event is not None and (event.key, event.tool, event.target, event.ok) == ("k1", "read_file", "a.txt", True)
    assert memory.entries == {} and memory.events == []


def test_held_is_ignored_for_a_call_with_side_effects(journal: Journal, memory: MemoryJournal, tree: Tree) -> None:
    """A write is journaled before and after it runs, whatever the stage asks."""
    request = msgspec.structs.replace(_request(tree, "write_file", path="b.txt", content="x\n"), held=True)
    result, event = journal.run_call(request)
    assert result.ok and event is None
    assert memory.entries["k1"].begin.pre_image == "absent" and memory.entries["k1"].result == result
    assert [e.key for e in memory.events if isinstance(e, ToolCalled)] == ["k1"]
