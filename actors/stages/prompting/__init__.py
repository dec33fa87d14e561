"""What a stage says to a model and reads back, as pure functions of text: no I/O.

Untrusted text is fenced with the dispatch's nonce and stripped of hidden characters
(``untrusted``); the system prompts and the rendering of a stage's inputs into chat
messages are deterministic, so a replay asks byte for byte the same (``prompts``); each
stage's prompt is cut to its token budget (``budget``); a task's search terms are weighed
(``terms``); a structured answer is read out of the model's text (``answers``) and a
rejected one is sent back with its problems, within the context (``corrections``). This
room imports nothing else of the stages: every other room builds on it.
"""
