"""What one ``RunStage`` request works with: persistence, the model, the sandbox, the user's hand.

A :class:`~actors.stages.request.context.StageContext` (``context``) is made per request
and wires its rooms once: the conversation with persistence, what is held back and written
behind (``writes``); the model behind its record (``model``), its calls in flight watched
for their deadlines (``callwatch``); the tool calls to the sandbox, journaled and retried
(``sandboxcalls``); the session's budget as the request spends it (``spending``); the
user's pause and steering (``control``). The workspace's ``AGENTS.md``, read through it for
every stage's prompt, is here too (``instructions``). These modules build on
:mod:`actors.stages.prompting` only.
"""
