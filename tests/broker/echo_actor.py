"""A test-only service actor: answers ``Ack("<instance> <n>")`` after ``delay`` seconds."""

from __future__ import annotations

import time

from actors._base import Actor, main
from broker.worker import Worker
from protocol import codec
from protocol.messages import Ack


class EchoActor(Actor):
    actor = "echo"

    def on_start(self) -> None:
        options = self.spec.options
        self.delay = float(options.get("delay", 0.0))
        self.count = 0
        self.worker = Worker(self, options.get("service", "echo"), self.handle,
                             capacity=int(options.get("capacity", 1)), threads=int(options.get("threads", 1)))
        self.worker.start()

    def handle(self, request):  # type: ignore[no-untyped-def]
        codec.COORDINATOR_REQUEST.decode(request.body)  # bad bodies get an Error reply
        self.count += 1
        time.sleep(self.delay)
        return Ack(detail=f"{self.spec.instance} {self.count}")

    def busy(self) -> list[str]:
        return self.worker.busy()


if __name__ == "__main__":
    main(EchoActor)
