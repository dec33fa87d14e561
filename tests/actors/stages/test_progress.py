"""The stage actor's progress board: each call in flight reported, an ended one once (done)."""

from __future__ import annotations

import pytest

from actors.llm.meter import Meter
from actors.stages.progress import QUIET_FOR, ProgressBoard
from protocol import codec
from protocol.errors import ProtocolError
from protocol.sessions.progress import ModelProgress


def test_the_board_reports_each_call_in_flight_and_an_ended_one_once_as_done() -> None:
    now = [10.0]
    board = ProgressBoard()
    meter = Meter(call_site="T1/S1/turn2", clock=lambda: now[0])
    board.watcher("s1", "executor", 2)(meter)
    meter.chunk(3)
    now[0] = 10.2
    assert board.snapshot() == [], "a call younger than QUIET_FOR sends nothing yet"
    now[0] = 11.25
    [first] = board.snapshot()
    assert first == ModelProgress(session_id="s1", stage="executor", visit=2, call_site="T1/S1/turn2", tokens=3,
                                  elapsed_s=1.25)
    meter.counted(40)
    meter.finish()
    now[0] = 20.0
    [last] = board.snapshot()
    assert (last.tokens, last.counted_by, last.elapsed_s, last.done) == (40, "server", 1.25, True)
    assert board.snapshot() == [], "an ended call is forgotten after its last report"


def test_a_quick_answer_sends_no_progress_at_all() -> None:
    now = [10.0]
    board = ProgressBoard()
    meter = Meter(clock=lambda: now[0])
    board.watcher("s1", "reviewer", 1)(meter)
    now[0] += QUIET_FOR / 2
    meter.finish()
    now[0] += 5
    assert board.snapshot() == [] and board.snapshot() == []


def test_a_progress_message_is_never_decoded_as_a_committed_event() -> None:
    body = codec.encode(ModelProgress(session_id="s1", stage="planner", tokens=5, elapsed_s=2.0))
    assert isinstance(codec.STREAM.decode(body), ModelProgress)
    with pytest.raises(ProtocolError) as refused:
        codec.EVENT.decode(body)
    assert refused.value.code == "ACODE-PROTO-002"
