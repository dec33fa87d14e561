"""The persistence actor: the single writer of acode's SQLite database.

- :mod:`actors.persistence.schema`: the tables, as versioned migration steps;
- :mod:`actors.persistence.store`: the idempotent writes and the reads (no ZeroMQ);
- :mod:`actors.persistence.service`: the actor, which serves the ``persistence`` service
  through the broker and publishes each newly stored event on the event stream.
"""
