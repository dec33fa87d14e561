"""``python -m actors.persistence --spec <json>``: run the persistence actor."""

from actors import lean  # noqa: F401  (first: keeps this process lean)
from actors._base import main
from actors.persistence.service import PersistenceActor

if __name__ == "__main__":
    main(PersistenceActor)
