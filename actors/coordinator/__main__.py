"""``python -m actors.coordinator --spec <json>``: what ``acode up --detach`` starts."""

from __future__ import annotations

import sys

import msgspec

from actors import lean  # noqa: F401  (first: keeps this process lean)
from actors.coordinator.actor import run_coordinator
from protocol.errors import AcodeError
from protocol.transport.spec import ActorSpec


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "--spec":
        print("usage: python -m actors.coordinator --spec '<json ActorSpec>'", file=sys.stderr)
        return 2
    try:
        spec = msgspec.json.decode(args[1], type=ActorSpec)
        return run_coordinator(spec)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        print(f"invalid --spec: {exc} (ACODE-CFG-001)", file=sys.stderr)
        return 2
    except AcodeError as exc:
        print(str(exc), file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
