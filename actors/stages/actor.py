"""The stage actor process: one of planner, executor, verifier, reviewer (``spec.actor``).

It serves the service named after its stage, one request at a time (capacity 1; run more
instances for more concurrency), on a worker thread so the loop keeps heartbeating
while a model thinks. Stage errors that are the model's or the plan's become a failed
:class:`StageResult`; transport errors (persistence or sandbox unreachable past their
deadline) answer an ``Error`` the coordinator treats as a lost attempt.

``PauseWork`` and ``SteerWork`` from the coordinator reach the request's
:class:`~actors.stages.request.control.WorkControl`; one that arrives before its request does (the
broker still had it) is kept for it, a few at most.

While a model answers, the loop thread publishes the call's progress on the event stream
twice a second (``actors.stages.progress``): ephemeral, never stored.
"""

from __future__ import annotations

import functools
import importlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
import zmq

from actors._base import Actor
from actors.stages.progress import PUBLISH_EVERY, ProgressBoard
from actors.stages.request.context import StageContext
from actors.stages.request.control import WorkControl
from broker.threads import ThreadClients
from broker.worker import Request, Worker
from protocol import codec
from protocol.basics.ids import new_id
from protocol.errors import AcodeError, ProtocolError, TransportError
from protocol.messages import Message, StageDone
from protocol.plans.results import Requirement, StageResult
from protocol.plans.stages import STAGES
from protocol.sessions.session import SteeringNote
from protocol.transport.spec import ActorSpec

__all__ = ["StageActor"]

# each stage's module, in the room of its own (the other rooms are what the four share)
_MODULES: dict[str, str] = {
    "planner": "actors.stages.planning.planner",
    "executor": "actors.stages.execution.executor",
    "verifier": "actors.stages.judging.verifier",
    "reviewer": "actors.stages.judging.reviewer",
}


def runner(stage: str) -> Callable[[StageContext], StageResult]:
    """The stage's ``run``, its module imported by name: a process serves one stage and need
    not hold the other three's code (the planner's context gathering alone is about 1 MB of
    resident memory)."""
    module = importlib.import_module(_MODULES[stage])
    run: Callable[[StageContext], StageResult] = module.run
    return run
_EARLY_LIMIT = 32  # controls kept for requests not started yet


# A drill for the coordinator's side of StageResult.requires: the first attempt of the
# stage named here answers with a result that names a write which never comes (a stage
# killed between handing its last write to its writer thread and the write leaving).
FAULT_LOST_WRITE = "ACODE_FAULT_LOST_LAST_WRITE"


def _with_lost_write(result: StageResult) -> StageResult:
    events = result.requires.events if result.requires is not None else []
    return msgspec.structs.replace(result, requires=Requirement(events=[*events, new_id()]))


class StageActor(Actor):
    def __init__(self, spec: ActorSpec, **kwargs: Any):
        super().__init__(spec, **kwargs)
        self.actor = spec.actor  # logs and heartbeats say "executor", not "stage"

    def on_start(self) -> None:
        if self.spec.actor not in STAGES:
            raise ValueError(f"stage actor started as {self.spec.actor!r}; expected one of {', '.join(STAGES)}")
        assert self.ctx is not None
        self.run_stage = runner(self.spec.actor)  # this stage's code only, imported now
        self.clients = ThreadClients(self.ctx, self.spec.endpoints.broker, sender=self.spec.instance,
                                     epoch=self.spec.epoch, log=self.log)
        self._cancels: dict[str, threading.Event] = {}  # request id -> its attempt's cancel event
        self._controls: dict[str, WorkControl] = {}  # request id -> the user's pause and steering
        self._early: OrderedDict[str, WorkControl] = OrderedDict()  # for requests not started yet
        self._control_lock = threading.Lock()  # the loop thread and the worker thread both look them up
        self.progress = ProgressBoard()
        self._progress_out = self.socket(zmq.PUB)
        self._progress_out.connect(self.spec.endpoints.events_in)
        self.loop.every(PUBLISH_EVERY, self._publish_progress)
        # Sends each request's writes behind (StageContext.commit(wait=False)): one thread and
        # its broker client for the actor's life, not a thread and a connection per request.
        self.writer = ThreadPoolExecutor(1, thread_name_prefix=f"{self.spec.actor}-writer")
        self.worker = Worker(self, self.spec.actor, self.handle, capacity=1, threads=1)
        self.worker.start()

    def _publish_progress(self) -> None:
        self.progress.publish(self._progress_out)

    def on_cancel(self, request_ids: list[str], reason: str) -> None:
        for request_id in request_ids:
            cancel = self._cancels.get(request_id)
            if cancel is not None and not cancel.is_set():
                self.log.info("stage_cancelled", request_id=request_id, reason=reason)
                cancel.set()

    def _control(self, request_id: str) -> WorkControl:
        with self._control_lock:
            control = self._controls.get(request_id)
            if control is None:
                control = self._early.setdefault(request_id, WorkControl())
                while len(self._early) > _EARLY_LIMIT:
                    self._early.popitem(last=False)
            return control

    def on_pause(self, request_ids: list[str], reason: str) -> None:
        for request_id in request_ids:
            control = self._control(request_id)
            if not control.paused:
                self.log.info("stage_pausing", request_id=request_id, reason=reason)
                control.pause()

    def on_steer(self, request_ids: list[str], note: SteeringNote) -> None:
        for request_id in request_ids:
            if self._control(request_id).steer(note):
                self.log.info("stage_steered", request_id=request_id, note=note.id, chars=len(note.text))

    def busy(self) -> list[str]:
        return self.worker.busy()

    def on_stop(self) -> None:
        for cancel in list(self._cancels.values()):
            cancel.set()  # a model waiting (scripted delay_s) gives up at once
        self.worker.close()
        self.writer.submit(self.clients.release)  # after a write still behind (a stage that failed)
        self.writer.shutdown(wait=False)
        self.clients.close()  # idle clients now, busy ones when their call returns

    def handle(self, request: Request) -> Message:
        body = codec.STAGE_REQUEST.decode(request.body)
        if body.stage != self.spec.actor:
            raise ProtocolError(f"{self.spec.instance} runs the {self.spec.actor} stage, not {body.stage}",
                                code="ACODE-PROTO-005")
        log = self.log.bind(session_id=body.session_id, trace_id=request.envelope.trace_id,
                            visit=body.visit, attempt=body.attempt)
        cancel = threading.Event()
        self._cancels[request.id] = cancel
        with self._control_lock:
            control = self._early.pop(request.id, None) or WorkControl()
            self._controls[request.id] = control
        for note in body.steering:
            control.steer(note)
        # replay "carried": the dispatch brought the replay index (read with the transition's commit)
        log.info("stage_started", replay="carried" if body.replay is not None else "ask")
        try:
            ctx = StageContext(body, clients=self.clients, cancel=cancel, log=log, control=control,
                               watch=self.progress.watcher(body.session_id, body.stage, body.visit,
                                                           body.attempt), writer=self.writer)
            ctx.result_behind = True  # the result names the stage's last writes instead of waiting for them
            try:
                result = self.run_stage(ctx)  # body.stage is this actor's (checked above)
            except TransportError:
                raise
            except AcodeError as exc:
                result = ctx.result(ok=False, summary=str(exc), error=exc.info())
            finally:
                ctx.close()
        except TransportError as exc:
            log.warning("stage_interrupted", error=str(exc))
            raise
        except AcodeError as exc:  # before a context exists: e.g. no model configured
            result = StageResult(session_id=body.session_id, stage=body.stage, visit=body.visit,
                                 attempt=body.attempt, ok=False, summary=str(exc), error=exc.info())
        finally:
            self._cancels.pop(request.id, None)
            self._controls.pop(request.id, None)
        if os.environ.get(FAULT_LOST_WRITE) == self.spec.actor and body.attempt == 1:
            result = _with_lost_write(result)
        # written once the result is sent: the coordinator's transition does not wait for it
        self.worker.after_reply(request, functools.partial(
            log.info, "stage_finished", ok=result.ok, summary=result.summary,
            duration_ms=round(result.metrics.duration_ms, 1)))
        return StageDone(result=result)
