"""Which session and trace a request belongs to, carried from hop to hop.

Every request's envelope names its session (``Envelope.session_id``) and its trace
(``Envelope.trace_id``, the session's own: :func:`protocol.basics.tracing.trace_id`). The broker
forwards the envelope as it is (it decodes it only for the id and the deadline), so the
trace crosses every hop for free; this module decides what a new request carries
(:func:`stamp`) and what the request being handled is (:func:`serving`), so a handler's own
calls inherit its trace without passing it by hand::

    CLI ──SubmitTask(S)──> coordinator ──RunStage(S)──> executor ──RunTool(S)──> sandbox
                               └──Commit(S)──> persistence <──Commit(S)──┘
    every hop's envelope: session_id=S, trace_id=trace_id(S); so is every line logged handling it

A request's session is, first to last: the one its sender names (``session_id=``), the
``session_id`` of its body (nearly every message about a session has one), the one of the
request the sending thread is serving. Its trace is the session's; a request about no
session inherits the trace of the request being served, or starts a new one.

The current request is a :class:`contextvars.ContextVar`: set by :class:`broker.worker.Worker`
on the thread that runs the handler, for as long as the handler runs; a thread the handler
starts does not inherit it (pass ``session_id=`` there, or name it in the body). Log lines
get the same two ids from the worker, through structlog's context variables.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import NamedTuple

from protocol.basics.ids import new_trace_id
from protocol.basics.tracing import trace_id as session_trace
from protocol.messages import Envelope, Message

__all__ = ["Trace", "current", "done", "serving", "stamp"]


class Trace(NamedTuple):
    session_id: str | None
    trace_id: str


_current: ContextVar[Trace | None] = ContextVar("acode_trace", default=None)


def current() -> Trace | None:
    """The session and trace of the request this context is serving, if any."""
    return _current.get()


def serving(envelope: Envelope) -> tuple[Trace, Token[Trace | None]]:
    """Make ``envelope``'s request the current one: its session and trace, and the token
    to give :func:`done` when it is handled."""
    session_id = envelope.session_id
    trace = Trace(session_id, envelope.trace_id or (session_trace(session_id) if session_id else new_trace_id()))
    return trace, _current.set(trace)


def done(token: Token[Trace | None]) -> None:
    """The request :func:`serving` made current is finished: back to what was before."""
    _current.reset(token)


def stamp(body: Message, session_id: str | None = None, trace_id: str | None = None) -> Trace:
    """The session and trace ids a new request with ``body`` carries (see the module)."""
    session_id = session_id or getattr(body, "session_id", None) or None
    if trace_id:
        return Trace(session_id, trace_id)
    if session_id:
        return Trace(session_id, session_trace(session_id))
    serving_now = _current.get()
    if serving_now is not None:
        return serving_now
    return Trace(None, new_trace_id())
