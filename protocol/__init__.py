"""Wire types, codec, error codes and the plan/result contracts (no I/O here).

The messages (``messages``), their codec (``codec``) and the error codes and exceptions
(``errors``) sit at the top; the rest lives in rooms that import one way, each only itself
and the rooms beneath it: ``basics``, then ``errors``, then ``calls`` and ``policy``, then
``plans``, then ``sessions``, with ``transport`` on ``basics`` and ``errors`` alone, and
``schema`` (the event schema file) over the sessions' events
(``tests/protocol/test_rooms.py``).
"""
