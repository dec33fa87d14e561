"""Bad text in a model's answer: the executor against real broker, persistence and sandbox.

A lone UTF-16 surrogate in a tool argument, native (as a provider hands it over) or written
as text (a ``\\udcff`` escape the json module decodes), is a tool error the model sees
(ACODE-EXEC-007, the argument, the offset, the fix); the step goes on with the next turn,
the answer is recorded, and a replay of the stage (a second context of the same session,
as after a kill -9 of the stage actor) reaches the same outcome from the record.
"""

from __future__ import annotations

import threading
from typing import Any

import structlog
from msgspec.structs import replace

from actors.llm.meter import Meter
from actors.llm.provider import ModelRequest
from actors.stages.execution import executor
from actors.stages.request.context import StageContext
from protocol.plans.results import ModelAnswer
from protocol.sessions.events import ToolCalled, TurnAnswered
from tests.actors.stages.conftest import FAST_RETRIES, Run, Spy, Stack
from tests.actors.stages.test_executor import call, done, plan, step, text, tool_messages

LONE = "<LONE>"  # becomes a lone surrogate in what the provider answers
FIX = ("which is not text; send it again as valid UTF-8 text (write characters as themselves; a \\u escape of a "
       "surrogate is only valid as half of a pair)")


class Surrogates(Spy):
    """The scripted provider with every ``<LONE>`` in its answers turned into ``\\udcff``:
    what an HTTP provider hands over once a server sent that escape."""

    def complete(self, request: ModelRequest, *, seq: int, cancel: threading.Event,
                 meter: Meter | None = None) -> ModelAnswer:
        answer = super().complete(request, seq=seq, cancel=cancel, meter=meter)
        calls = [replace(c, arguments=_lone(c.arguments)) for c in answer.tool_calls]
        return replace(answer, content=_lone(answer.content), tool_calls=calls)


def _lone(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(LONE, "\udcff")
    if isinstance(value, list):
        return [_lone(v) for v in value]
    if isinstance(value, dict):
        return {_lone(k): _lone(v) for k, v in value.items()}
    return value


def _surrogating(run: Run) -> Run:
    run.spy = run.ctx.model.provider = Surrogates(run.spy.provider)
    return run


def _replay(run: Run) -> tuple[StageContext, Spy]:
    """A fresh context of the same session, as a re-dispatched stage (attempt 2) gets."""
    request = run.ctx.request
    ctx = StageContext(replace(request, attempt=request.attempt + 1), clients=run.stack.clients,
                       cancel=threading.Event(), log=structlog.get_logger())
    ctx.retry_waits = FAST_RETRIES
    spy = Surrogates(ctx.model.provider)
    ctx.model.provider = spy
    return ctx, spy


# (tool, arguments, the argument named, its offset); every tool the model may call, and a name
BAD = [
    ("write_file", {"path": f"a{LONE}.txt", "content": "x"}, "`$.path`", 1),
    ("write_file", {"path": "b.txt", "content": f"ok {LONE}"}, "`$.content`", 3),
    ("modify_file", {"path": "c.txt", "edits": [{"search": "a", "replace": "b"},
                                                {"search": f"c{LONE}", "replace": "d"}]}, "`$.edits[1].search`", 1),
    ("modify_file", {"path": "c.txt", "diff": f"@@ -1 +1 @@\n-a\n+{LONE}\n"}, "`$.diff`", 16),
    ("read_file", {"path": f"d/{LONE}"}, "`$.path`", 2),
    ("list_directory", {"path": LONE}, "`$.path`", 0),
    ("create_directory", {"path": f"new{LONE}"}, "`$.path`", 3),
    ("search_code", {"query": f"{LONE}x"}, "`$.query`", 0),
    ("run_terminal", {"command": f"touch e{LONE}"}, "`$.command`", 7),
    ("step_complete", {"summary": f"done {LONE}"}, "`$.summary`", 5),
    ("read_file", {"path": "a.txt", f"x{LONE}": 1}, "the name of an argument in `$`", 1),
]


def _refusal(tool: str, where: str, offset: int) -> str:
    return (f"error: invalid arguments for {tool}: {where} holds a lone UTF-16 surrogate (\\udcff) at character "
            f"offset {offset}, {FIX}; it takes ")


def test_a_lone_surrogate_in_any_argument_is_a_tool_error_and_the_step_goes_on(stack: Stack) -> None:
    bad_turn = {"tool_calls": [{"name": tool, "arguments": arguments} for tool, arguments, _, _ in BAD]}
    run = _surrogating(stack.stage(
        "executor", [bad_turn, call("write_file", path="a.txt", content="alpha\n"), done("wrote a.txt")],
        plan(step("S1")), files={"c.txt": "a\nc\n"}))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    told = tool_messages(run, 1)
    assert len(told) == len(BAD)
    for (role, content), (tool, _, where, offset) in zip(told, BAD, strict=True):
        assert role == "tool" and content.startswith(_refusal(tool, where, offset)), content
        assert content.endswith("(ACODE-EXEC-007)")
    [record] = result.execution.steps  # type: ignore[union-attr]
    assert (record.status, record.turns, record.tool_calls, record.files_changed) == ("completed", 3, 1, ["a.txt"])
    assert sorted(p.name for p in run.workspace.iterdir()) == ["a.txt", "c.txt"]
    assert (run.workspace / "c.txt").read_text() == "a\nc\n"
    events = run.events()
    assert [e.tool for e in events if isinstance(e, ToolCalled) and ":ctx" not in e.key] == ["write_file"]
    turns = [e for e in events if isinstance(e, TurnAnswered)]
    assert turns[0].correction.startswith(_refusal("write_file", "`$.path`", 1)), "acode run shows why nothing ran"
    assert [t.correction for t in turns[1:]] == ["", ""]

    replay, spy = _replay(run)
    again = executor.run(replay)
    assert spy.requests == [], "every answer, the one with bad text included, was recorded and is replayed"
    assert again.ok and again.execution is not None
    assert [(s.status, s.turns, s.tool_calls) for s in again.execution.steps] == [("completed", 3, 1)]


def test_a_surrogate_escape_in_a_call_written_as_text_is_refused_the_same_way(stack: Stack) -> None:
    written = ('[{"name": "write_file", "arguments": {"path": "a\\udcff.txt", "content": "x"}}, '
               '{"name": "run_terminal", "arguments": "{\\"command\\": \\"echo \\\\udcff\\"}"}]')
    run = stack.stage("executor", [text(written), text('{"name": "write_file", "arguments": '
                                                       '{"path": "a.txt", "content": "alpha\\n"}}'), done()],
                      plan(step("S1")))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    [(role, content)] = tool_messages(run, 1)
    first, second = content.split("\n\n")
    assert role == "user"
    assert first.startswith("Result of your write_file call text_0:\n" + _refusal("write_file", "`$.path`", 1))
    assert second.startswith("Result of your run_terminal call text_1:\n" + _refusal("run_terminal", "`$.command`", 5))
    assert sorted(p.name for p in run.workspace.iterdir()) == ["a.txt"]


def test_answer_text_with_a_lone_surrogate_is_recorded_scrubbed_and_replayed(stack: Stack) -> None:
    run = _surrogating(stack.stage(
        "executor", [text(f"Let me think {LONE} first."), call("write_file", path="a.txt", content="alpha\n"),
                     done()], plan(step("S1"))))

    result = executor.run(run.ctx)

    assert result.ok, result.summary
    shown = run.spy.requests[1].messages
    assert [m.content for m in shown if m.role == "assistant"] == ["Let me think \ufffd first."]
    replay, spy = _replay(run)
    assert executor.run(replay).ok and spy.requests == []
