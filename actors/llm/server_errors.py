"""What a model server's error says, when it is not worth a retry.

llama.cpp's server answers HTTP 500 for configuration and request errors, not only for
failures of its own, and HTTP 400 for a prompt over its context; OpenAI-compatible
servers say the latter with ``context_length_exceeded``. Retrying any of these sends the
same request for the same answer, so :func:`classify` turns the known ones into a
permanent ModelError with its fix:

- ACODE-LLM-013: the prompt does not fit the context;
- ACODE-LLM-014: the server's configuration (llama-server without ``--jinja``, a chat
  template that cannot render the conversation);
- ACODE-LLM-016: a request the server cannot read (a tool call's arguments that are not JSON).

:func:`is_format_error` recognises the other kind of failure: the server could not parse
the model's own output (llama.cpp's chat parser, as an error event in the stream). That
is the model's fault, answered with a correction (see ``HttpModel.interrupted``).
The strings are llama.cpp's own (``tools/server``), OpenAI's error code and Ollama's
wording; a server that words them otherwise falls back to the transient path.
"""

from __future__ import annotations

import re

from protocol.errors import ModelError

__all__ = ["classify", "is_format_error"]

_JINJA_FIX = ("start llama-server with --jinja and a chat template that supports tools (the model's own, or "
              "--chat-template-file FILE)")
# Errors a model server gives for a request it will never accept as it is: (pattern over the
# error body, code, what it means, the fix). Matched on any status, so a server that says it
# with a 500 is not retried as if it were busy.
_PERMANENT: tuple[tuple[re.Pattern[str], str, str, str], ...] = (
    (re.compile(r"exceeds the available context size|exceed_context_size_error|context_length_exceeded|"
                r"maximum context length is|input length exceeds the context length|"
                r"greater than the context length", re.IGNORECASE),
     "ACODE-LLM-013", "the prompt does not fit the model's context",
     "start the server with a larger context (llama-server --ctx-size N) and set model.num_ctx to it, or lower "
     "the stage budgets (planner.context_tokens, executor.tool_result_tokens, model.stage_max_tokens)"),
    (re.compile(r"tools param requires --jinja", re.IGNORECASE),
     "ACODE-LLM-014", "the server cannot take tools", _JINJA_FIX),
    (re.compile(r"Jinja Exception|(error|fail)\w* (to )?(apply|applying|render|rendering) (the )?chat template",
                re.IGNORECASE),
     "ACODE-LLM-014", "the server's chat template cannot render this conversation",
     "start llama-server with --jinja and --chat-template-file FILE naming a template that supports system and "
     "tool messages"),
    (re.compile(r"Failed to parse tool call arguments as JSON", re.IGNORECASE),
     "ACODE-LLM-016", "the server could not read the arguments of a tool call as JSON",
     "raise model.max_tokens (or model.stage_max_tokens) if the model's call was cut, or use a model that writes "
     "valid tool calls"),
)
# A server that could not parse the model's own output into its answer format (llama.cpp's
# chat parser): the model's fault, answered with a correction, never with an identical retry.
_FORMAT = re.compile(r"Failed to parse input|does not match the expected format|failed to parse (the )?"
                     r"(model )?(output|tool call)", re.IGNORECASE)


def classify(text: str, *, where: str, model: str, said: str = "") -> ModelError | None:
    """A permanent error for what a server said (``text``: its raw error body, searched;
    ``said``: its message, quoted), or None."""
    for pattern, code, what, fix in _PERMANENT:
        if pattern.search(text):
            return ModelError(f"{where} refused {model}'s request: {what} ({_first_line(said or text)}); {fix}",
                              code=code)
    return None


def is_format_error(text: str) -> bool:
    """Did the server fail to parse the model's output (rather than fail itself)?"""
    return bool(_FORMAT.search(text))


def _first_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:300] + "…"
