"""The limits a session runs within and the user's say in it, as settings (pure, no I/O).

The sandbox settings every command carries (``sandbox``) and the checkpoints taken before a
call changes the workspace (``checkpoints``); the user's hooks (``hooks``) and the
conditions that choose when one runs (``conditions``, with their syntax in
``condition_syntax``); a session's budget (``budget``); and the anomalies that say a model
went off the rails, with their thresholds (``anomalies``). These modules build on
:mod:`protocol.basics` and :mod:`protocol.errors` only, and know nothing of the tools.
"""
