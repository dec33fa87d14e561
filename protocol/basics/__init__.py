"""The basics every other part of the protocol builds on, importing nothing of acode's.

Time-ordered ids (``ids``), trace and span ids derived from what they name (``tracing``),
text with no UTF-8 form (``text``), text made safe to show on a terminal (``printable``),
the parts of a failure that differ between two sightings of it (``volatile``) and secret
redaction (``redact``, which :mod:`protocol.errors` runs over every message it carries).
These modules import no other module of :mod:`protocol`.
"""
