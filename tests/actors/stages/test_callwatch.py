"""The call watch: a call's deadline and cancel, the flush of a long call, and its one thread."""

from __future__ import annotations

import threading

from actors.stages.callwatch import CallWatch
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
