"""The call watch: a call's deadline and cancel, the flush of a long call, and its one thread."""

from __future__ import annotations

import threading

from actors.llm.meter import Meter
from actors.stages.request.callwatch import CallWatch, Watched, turn_deadline
from tests.harness import wait_until


def test_a_call_past_its_deadline_is_stopped_and_marked_expired() -> None:
    watch = CallWatch(lambda: None)
    try:
        with watch.call(threading.Event(), deadline=0.0) as watched:
            assert watched.stop.wait(5) and watched.expired
    finally:
        watch.close()


def test_a_cancelled_stage_stops_the_call_without_calling_it_expired() -> None:
    watch = CallWatch(lambda: None)
    cancel = threading.Event()
    try:
        with watch.call(cancel) as watched:
            cancel.set()
            assert watched.stop.wait(5) and not watched.expired
    finally:
        watch.close()


def test_a_long_call_flushes_once_and_a_quick_one_never() -> None:
    flushed: list[int] = []
    watch = CallWatch(lambda: flushed.append(1), flush_after=0.1)
    try:
        with watch.call(threading.Event()):
            pass  # quick: over before the watch looks
        with watch.call(threading.Event()):
            wait_until(lambda: flushed == [1], 5, what="the long call's flush")
            threading.Event().wait(0.3)  # a few more ticks: still one flush
        assert flushed == [1]
    finally:
        watch.close()


def test_the_thread_ends_when_idle_and_a_new_call_starts_another() -> None:
    exits: list[str] = []
    watch = CallWatch(lambda: None, on_exit=lambda: exits.append(threading.current_thread().name))
    try:
        with watch.call(threading.Event()):
            pass
        wait_until(lambda: len(exits) == 1, 10, what="the idle watch thread to end")
        with watch.call(threading.Event(), deadline=0.0) as watched:
            assert watched.stop.wait(5), "a new thread watches the next call"
    finally:
        watch.close()
    assert len(exits) == 2 and all(name == "acode-call-watch" for name in exits)


def _meter(now: list[float], *, expect_first_s: float = 0.0, stall_s: float = 1.0) -> Meter:
    meter = Meter(clock=lambda: now[0])
    meter.restart()
    meter.expect_first_s, meter.stall_s = expect_first_s, stall_s
    return meter


def test_past_its_deadline_a_call_still_receiving_tokens_goes_on_and_a_silent_one_does_not() -> None:
    now = [0.0]
    meter = _meter(now, stall_s=1.0)
    watched = Watched(threading.Event(), deadline=10.0, started=0.0, limit=40.0, meter=meter)
    now[0] = 9.5
    meter.hear()
    now[0] = 10.2
    assert not watched.overdue(now[0]), "a token 0.7 s ago: the model is writing"
    now[0] = 30.0
    meter.hear()
    assert not watched.overdue(30.5)
    assert watched.overdue(31.0), "silent for the stall gap: stopped"
    meter.hear()
    assert watched.overdue(40.0), "never past the limit, tokens or not"


def test_past_its_deadline_a_call_reading_its_prompt_goes_on_for_the_prompts_expected_time() -> None:
    now = [0.0]
    watched = Watched(threading.Event(), deadline=10.0, started=0.0, limit=40.0,
                      meter=_meter(now, expect_first_s=25.0))
    assert not watched.overdue(24.0), "no token yet, but within the prompt's measured processing time"
    assert watched.overdue(25.0)
    firm = Watched(threading.Event(), deadline=10.0, started=0.0, limit=40.0, meter=_meter(now))
    assert firm.overdue(10.0), "a provider that says nothing of its progress gets a firm deadline"
    assert Watched(threading.Event(), deadline=10.0, started=0.0, meter=_meter(now, expect_first_s=25.0)) \
        .overdue(10.0), "without a limit the deadline is firm"


def test_a_turns_deadline_fits_a_normal_call_at_the_measured_pace_within_four_times_the_setting() -> None:
    assert turn_deadline(100.0, 120.0, 150.0, None) == (220.0, 580.0)
    assert turn_deadline(100.0, 120.0, 150.0, 30.0) == (220.0, 580.0), "a normal call fits: unchanged"
    assert turn_deadline(100.0, 120.0, 200.0, 90.0) == (290.0, 580.0), "stretched to fit the call"
    assert turn_deadline(100.0, 120.0, 200.0, 900.0) == (580.0, 580.0), "never past 4x the setting"
    assert turn_deadline(100.0, 120.0, 200.0, 900.0, ceiling=400.0) == (400.0, 400.0), "nor past the stage's end"
    assert turn_deadline(100.0, 120.0, 150.0, None, ceiling=150.0) == (220.0, 220.0), "nor cut below the setting"
