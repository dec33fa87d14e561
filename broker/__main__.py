"""``python -m broker --spec <json>``: the broker process (see broker.server)."""

from __future__ import annotations

from actors import lean  # noqa: F401  (first: keeps this process lean)
from actors._base import Actor, main
from broker.server import Broker

__all__ = ["BrokerActor"]


class BrokerActor(Actor):
    actor = "broker"

    def on_start(self) -> None:
        endpoints = self.spec.endpoints
        self.broker = Broker(self, frontend=endpoints.broker, events_in=endpoints.events_in,
                             events_out=endpoints.events_out)


if __name__ == "__main__":
    main(BrokerActor)
