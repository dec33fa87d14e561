"""The watched exchange: interruptions are raised at once, and a connection to a remote peer is cut.

The helper's work here is plain Python (an event to wait on) rather than HTTP, so the
watcher's timing is checked without a server; the provider tests cover it over HTTP.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from actors.llm.exchange import Exchange, Interrupted, run_watched


def _stuck(release: threading.Event) -> Any:
    def work(exchange: Exchange) -> str:
        release.wait(10)
        return "late"
    return work


def test_cancel_interrupts_work_that_has_no_socket_yet() -> None:
    release, cancel = threading.Event(), threading.Event()
    threading.Timer(0.1, cancel.set).start()
    started = time.monotonic()
    try:
        with pytest.raises(Interrupted) as caught:
            run_watched(_stuck(release), cancel=cancel, first_token_s=30, idle_s=30, allow_remote=False,
                        name="acode-test-http")
        assert caught.value.reason == "cancelled"
        assert time.monotonic() - started < 0.1 + 0.5  # the join waits at most 0.2 s for a stuck helper
    finally:
        release.set()


def test_the_first_token_deadline_then_the_idle_gap() -> None:
    release = threading.Event()
    try:
        with pytest.raises(Interrupted) as caught:
            run_watched(_stuck(release), cancel=threading.Event(), first_token_s=0.1, idle_s=30, allow_remote=False,
                        name="acode-test-http")
        assert caught.value.reason == "first_token"

        def one_chunk_then_silence(exchange: Exchange) -> str:
            for _ in exchange.watch([b"x"]):
                pass
            release.wait(10)
            return "late"

        with pytest.raises(Interrupted) as caught:
            run_watched(one_chunk_then_silence, cancel=threading.Event(), first_token_s=30, idle_s=0.1,
                        allow_remote=False, name="acode-test-http")
        assert caught.value.reason == "idle"
    finally:
        release.set()


def test_results_and_errors_of_the_work_come_back() -> None:
    assert run_watched(lambda exchange: 42, cancel=threading.Event(), first_token_s=1, idle_s=1, allow_remote=False,
                       name="acode-test-http") == 42

    def fail(exchange: Exchange) -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        run_watched(fail, cancel=threading.Event(), first_token_s=1, idle_s=1, allow_remote=False,
                    name="acode-test-http")


class _Peer:
    """What httpcore's trace hands over: a stream whose socket has a peer address."""

    def __init__(self, address: str):
        self.address = address
        self.shut = False

    def get_extra_info(self, key: str) -> Any:
        assert key == "socket"
        return self

    def getpeername(self) -> tuple[str, int]:
        return self.address, 11434

    def shutdown(self, how: int) -> None:
        self.shut = True


@pytest.mark.parametrize(("address", "allow_remote", "cut"), [
    ("203.0.113.5", False, True), ("203.0.113.5", True, False), ("127.0.0.1", False, False),
    ("192.168.1.7", False, False),
])
def test_a_connection_to_a_remote_peer_is_cut_when_it_opens(address: str, allow_remote: bool, cut: bool) -> None:
    exchange = Exchange(first_token_s=1, idle_s=1, allow_remote=allow_remote)
    peer = _Peer(address)
    exchange.trace("connection.connect_tcp.complete", {"return_value": peer})
    assert peer.shut is cut
    assert (exchange.abort, exchange.peer) == (("remote", address) if cut else (None, ""))


def test_a_connection_opening_after_a_stop_is_cut_at_once() -> None:
    exchange = Exchange(first_token_s=1, idle_s=1, allow_remote=False)
    exchange.stop("cancelled")
    peer = _Peer("127.0.0.1")
    exchange.trace("connection.connect_tcp.complete", {"return_value": peer})
    assert peer.shut and exchange.abort == "cancelled"
