"""Live progress of a model call: ephemeral messages on the event stream, never stored.

While a stage waits for its model, the stage actor publishes a :class:`ModelProgress` for
the call at most twice a second, straight onto the broker's event stream (XSUB side) under
the session's topic, and one last one with ``done`` set when the call ends. Persistence
never sees them (it only publishes what it committed), so they are not in the event log,
``acode attach`` replays none of them, and they carry no ``seq``: a follower decodes the
stream with :data:`protocol.codec.STREAM`, which tells a progress message from a committed
:class:`~protocol.sessions.events.Event` by its tag, and hands progress to the thinking line only.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from protocol.plans.stages import Stage

__all__ = ["INTERVAL_ENV", "ModelProgress"]

INTERVAL_ENV = "ACODE_PROGRESS_INTERVAL_S"  # seconds between two plain progress lines off a terminal (cli.thinking)


class ModelProgress(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type",
                    tag="model_progress"):
    """One model call's progress: output tokens so far (``counted_by`` says how they were
    counted: stream chunks, or the server's own count) and seconds since the call began."""

    session_id: str
    stage: Stage
    visit: Annotated[int, msgspec.Meta(ge=1, le=1_000)] = 1
    call_site: Annotated[str, msgspec.Meta(max_length=200)] = ""
    tokens: Annotated[int, msgspec.Meta(ge=0, le=10**9)] = 0
    elapsed_s: Annotated[float, msgspec.Meta(ge=0, le=10**7)] = 0.0
    counted_by: Literal["chunks", "server"] = "chunks"
    done: bool = False  # the call has ended: clear the line
    attempt: Annotated[int, msgspec.Meta(ge=1, le=1_000)] = 1  # the stage's attempt (a retry's calls start over)
