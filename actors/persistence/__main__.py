"""``python -m actors.persistence --spec <json>``: run the persistence actor."""

from actors._base import main
from actors.persistence.service import PersistenceActor

if __name__ == "__main__":
    main(PersistenceActor)
