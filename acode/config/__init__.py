"""The user's configuration: files, environment and flags resolved into one
:class:`~acode.config.schema.AcodeConfig` (:mod:`acode.config.loader`), what it becomes
for a session or the actor set (:mod:`acode.config.settings`), and which of a workspace's
settings it may loosen only when the user trusts it (:mod:`acode.config.trust`).

It lives in the client, below the CLI: a session submitted from Python resolves the same
configuration ``acode run`` does.
"""
