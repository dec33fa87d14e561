"""Events as a client reads them: the typed events of :mod:`protocol.sessions.events`, and a generic
one for what this client does not know.

Within a major schema version (:data:`protocol.schema.SCHEMA_VERSION`) changes are
additive: a newer acode may send an event type this client has never heard of, or a value
a field of a known type did not allow. Such an event is handed over as a
:class:`GenericEvent` with its sequence number and its fields as sent, never dropped and
never a failure: a gap in the numbers would stall a follower, and a failure would end it.
An unknown *field* of a known type is ignored by msgspec already.

Persistence's ``GetEvents`` reply is therefore decoded in two steps: the list with each
event left as raw bytes (:data:`EVENT_LIST`), then each event on its own
(:func:`decode_event`).
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import msgspec

from protocol.codec import TypedDecoder
from protocol.errors import ProtocolError
from protocol.messages import Error
from protocol.schema import SCHEMA_VERSION
from protocol.sessions.events import Event
from protocol.sessions.progress import ModelProgress

__all__ = ["EVENT_LIST", "AnyEvent", "GenericEvent", "RawEventList", "decode_event", "decode_stream", "kind", "typed"]


class GenericEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event of a type (or with a value) this client does not know: ``type``, ``seq`` and
    the rest as sent in ``data`` (every field, ``type`` and ``seq`` included)."""

    schema_version: ClassVar[int] = SCHEMA_VERSION  # the schema this client reads (the event is of a later one)

    type: str
    seq: int
    id: str = ""
    session_id: str = ""
    at: float = 0.0
    data: dict[str, Any] = {}


AnyEvent = Event | GenericEvent


class RawEventList(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="event_list"):
    """Persistence's ``EventList`` with each event still encoded."""

    events: list[msgspec.Raw] = []


class _Envelope(msgspec.Struct, frozen=True):
    """What any event has: enough to order it and say what it is."""

    type: str
    seq: int
    id: str = ""
    session_id: str = ""
    at: float = 0.0


@functools.cache
def _decoder(type_: Any) -> msgspec.msgpack.Decoder[Any]:
    """Built at first use: the event union's decoder costs milliseconds (``import acode`` stays cheap)."""
    return msgspec.msgpack.Decoder(type_)


def _generic(data: bytes) -> GenericEvent:
    try:
        head = _decoder(_Envelope).decode(data)
        fields = _decoder(dict[str, Any]).decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise ProtocolError(f"an event without a type or a sequence number: {exc} ({len(data)} bytes)",
                            code="ACODE-PROTO-002") from exc
    return GenericEvent(type=head.type, seq=head.seq, id=head.id, session_id=head.session_id, at=head.at,
                        data=fields)


def decode_event(data: bytes | msgspec.Raw) -> AnyEvent:
    """One event: typed when this client knows it, else a :class:`GenericEvent`
    (ACODE-PROTO-002 only for bytes that are no event at all)."""
    raw = bytes(data)
    try:
        return _decoder(Event).decode(raw)  # type: ignore[no-any-return]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return _generic(raw)


def decode_stream(data: bytes) -> AnyEvent | ModelProgress:
    """One message of the event stream: an event (typed or generic) or a model's progress."""
    try:
        return _decoder(Event | ModelProgress).decode(data)  # type: ignore[no-any-return]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return _generic(data)


EVENT_LIST: TypedDecoder[RawEventList | Error] = TypedDecoder(RawEventList | Error, "event list")


def typed(events: list[AnyEvent]) -> list[Event]:
    """The events this client knows (what health, budgets and renderers read)."""
    return [e for e in events if not isinstance(e, GenericEvent)]


def kind(event: AnyEvent) -> str:
    """An event's type as its JSON names it: ``session_created``, ``tool_called``, …"""
    if isinstance(event, GenericEvent):
        return event.type
    return str(event.__struct_config__.tag)
