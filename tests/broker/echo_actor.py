"""A test-only service actor: answers ``Ack("<instance> <n>")`` after ``delay`` seconds.

With ``barrier`` N, a request is answered only once N requests are being handled at the
same time (an error after 5 s otherwise): requests sent one after another never meet it.

With ``relay`` SERVICE, the handler also calls SERVICE (a ``GetStatus``, which names no
session) and appends its answer: ``"front 1 <- back 1"``. Each request handled writes an
``echo_handled`` line."""

from __future__ import annotations

import threading
import time

from actors._base import Actor, main
from broker.threads import ThreadClients
from broker.worker import Worker
from protocol import codec
from protocol.messages import Ack, GetStatus


class EchoActor(Actor):
    actor = "echo"

    def on_start(self) -> None:
        options = self.spec.options
        self.delay = float(options.get("delay", 0.0))
        self.count = 0
        barrier = int(options.get("barrier", 0))
        self.barrier = threading.Barrier(barrier, timeout=5.0) if barrier else None
        self.relay = str(options.get("relay", ""))
        assert self.ctx is not None
        self.clients = ThreadClients(self.ctx, self.spec.endpoints.broker, sender=self.spec.instance,
                                     epoch=self.spec.epoch)
        self.worker = Worker(self, options.get("service", "echo"), self.handle,
                             capacity=int(options.get("capacity", 1)), threads=int(options.get("threads", 1)))
        self.worker.start()

    def handle(self, request):  # type: ignore[no-untyped-def]
        codec.COORDINATOR_REQUEST.decode(request.body)  # bad bodies get an Error reply
        self.count += 1
        count = self.count
        if self.barrier is not None:
            self.barrier.wait()  # BrokenBarrierError: the handler's error reply
        time.sleep(self.delay)
        self.log.info("echo_handled", count=count)
        detail = f"{self.spec.instance} {count}"
        if self.relay:
            relayed = self.clients.call(self.relay, GetStatus(), timeout=5.0, decoder=codec.COORDINATOR_REPLY)
            detail += f" <- {relayed.detail}"
        return Ack(detail=detail)

    def on_stop(self) -> None:
        self.clients.close()

    def busy(self) -> list[str]:
        return self.worker.busy()


if __name__ == "__main__":
    main(EchoActor)
