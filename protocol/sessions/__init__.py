"""A session: its durable state and settings, its event log, its live progress and its health.

The snapshot persistence stores and the settings a session runs with (``session``), the
model profile among them (``profiles``, which names the settings back under
``TYPE_CHECKING``); the append-only event log (``events``); a model call's ephemeral
progress (``progress``); the session's health read from its records (``health``); and
each stage's prompt budget from its settings (``budgets``).
These modules build on every room below them (:mod:`protocol.basics`,
:mod:`protocol.errors`, :mod:`protocol.calls`, :mod:`protocol.policy`,
:mod:`protocol.plans`); the messages and the codec build on them.
"""
