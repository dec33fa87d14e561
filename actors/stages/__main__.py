"""``python -m actors.stages --spec <json>``: a planner, executor, verifier or reviewer process."""

from actors import lean  # noqa: F401  (first: keeps this process lean)
from actors._base import main
from actors.stages.actor import StageActor

if __name__ == "__main__":
    main(StageActor)
