"""Stable error codes and the one exception tree every acode process raises.

An error says what happened, the offending value and what to do; its code
(``ACODE-<AREA>-<NNN>``) is stable, so scripts and tests may match on it::

    AcodeError(Exception)                         .code  .message
    ├── ProtocolError(AcodeError, ValueError)             ACODE-PROTO-…
    ├── TransportError(AcodeError, ConnectionError)       ACODE-NET-…
    │   ├── RequestTimeout(TransportError, TimeoutError)
    │   └── NotRunning(TransportError)
    ├── ConfigError(AcodeError, ValueError)               ACODE-CFG-…
    ├── OrchestrationError(AcodeError)                    ACODE-ORCH-…
    │   ├── StageTimeout(OrchestrationError, TimeoutError)
    │   ├── CycleLimitReached(OrchestrationError)
    │   ├── WorkPaused(OrchestrationError)                ACODE-ORCH-010
    │   ├── BudgetExhausted(OrchestrationError)           ACODE-ORCH-013
    │   ├── HookStopped(OrchestrationError)               ACODE-ORCH-014..016
    │   └── TransitionError(OrchestrationError, ValueError)
    ├── PlanError(AcodeError, ValueError)                 ACODE-PLAN-…
    ├── ExecutionError(AcodeError)                        ACODE-EXEC-…
    │   └── AnomalyPause(ExecutionError)                  ACODE-EXEC-011
    ├── SandboxError(AcodeError)                          ACODE-SBX-…
    │   └── PathEscapeError(SandboxError, PermissionError)
    ├── ModelError(AcodeError)                            ACODE-LLM-…
    ├── StorageError(AcodeError)                          ACODE-STORE-…
    │   └── NotFoundError(StorageError, LookupError)
    ├── SupervisionError(AcodeError)                      ACODE-SUP-…
    ├── McpError(AcodeError)                              ACODE-MCP-…
    └── CliError(AcodeError)                              ACODE-CLI-…

Errors cross process boundaries as :class:`ErrorInfo` (code, message, retryable) and
are rebuilt into the matching class with :func:`from_info`. An error's message is redacted
when the error is made (:func:`protocol.basics.redact.redact`): messages quote offending values,
and those may hold secrets.
"""

from __future__ import annotations

import msgspec

from protocol.basics.redact import redact

__all__ = [
    "CODES",
    "with_code",
    "AcodeError",
    "AnomalyPause",
    "BudgetExhausted",
    "CliError",
    "ConfigError",
    "CycleLimitReached",
    "ErrorInfo",
    "ExecutionError",
    "HookStopped",
    "McpError",
    "ModelError",
    "NotFoundError",
    "NotRunning",
    "OrchestrationError",
    "PathEscapeError",
    "PlanError",
    "ProtocolError",
    "RequestTimeout",
    "SandboxError",
    "StageTimeout",
    "StorageError",
    "SupervisionError",
    "TransitionError",
    "TransportError",
    "WorkPaused",
    "from_info",
]

#: Every code acode emits, with its one-line meaning (README lists them).
CODES: dict[str, str] = {
    "ACODE-PROTO-001": "malformed frame",
    "ACODE-PROTO-002": "message failed to decode or validate",
    "ACODE-PROTO-003": "unsupported protocol version",
    "ACODE-PROTO-004": "unknown service",
    "ACODE-PROTO-005": "message type not handled by this service",
    "ACODE-NET-001": "request deadline passed without a reply",
    "ACODE-NET-002": "the worker handling the request was lost",
    "ACODE-NET-003": "acode is not running",
    "ACODE-ORCH-001": "stage execution failed",
    "ACODE-ORCH-002": "stage timeout",
    "ACODE-ORCH-003": "cycle limit reached",
    "ACODE-ORCH-004": "escalation: a human must decide",
    "ACODE-ORCH-005": "context budget exceeded",
    "ACODE-ORCH-006": "transition refused",
    "ACODE-ORCH-007": "pipeline cancelled",
    "ACODE-ORCH-008": "the same verify failure twice in a row",
    "ACODE-ORCH-009": "the workspace is gone: the session cannot go on",
    "ACODE-ORCH-010": "paused by the user: the stage stopped at a safe point",
    "ACODE-ORCH-011": "plan review: the plan waits for the user's approve or replan",
    "ACODE-ORCH-012": "the workspace's changes cannot be computed against the session's baseline",
    "ACODE-ORCH-013": "a session budget is spent: the session pauses until `acode resume --budget-…` extends it",
    "ACODE-ORCH-014": "a hook paused the session (its pause or confirm action, or a script's exit 2)",
    "ACODE-ORCH-015": "a hook aborted the session",
    "ACODE-ORCH-016": "a hook restarted the stage",
    "ACODE-ORCH-017": "the same criteria failed again after changes that did not touch them (anomaly verify_repeat): "
                      "the session pauses",
    "ACODE-PLAN-001": "request parsing failed",
    "ACODE-PLAN-002": "context preparation failed",
    "ACODE-PLAN-003": "decomposition failed",
    "ACODE-PLAN-004": "invalid plan structure",
    "ACODE-PLAN-005": "circular dependency",
    "ACODE-PLAN-006": "token budget exceeded",
    "ACODE-PLAN-007": "planning timeout",
    "ACODE-EXEC-001": "step execution failed",
    "ACODE-EXEC-002": "tool invocation failed",
    "ACODE-EXEC-003": "turn limit reached",
    "ACODE-EXEC-004": "sandbox violation",
    "ACODE-EXEC-005": "approval denied",
    "ACODE-EXEC-006": "step timeout",
    "ACODE-EXEC-007": "invalid tool parameters",
    "ACODE-EXEC-008": "the model repeated the same tool call, or the same invalid answer, three times in a row",
    "ACODE-EXEC-009": "the call needs a human's approval (the session waits: acode approve / acode deny)",
    "ACODE-EXEC-010": "the approvals policy denies this call",
    "ACODE-EXEC-011": "the model went off the rails (anomaly evidence in the message): the session pauses",
    "ACODE-EXEC-012": "a pre_tool hook denied the call",
    "ACODE-EXEC-013": "a try of a step ended on an anomaly: the step's next try starts from a fresh window",
    "ACODE-SBX-001": "tool not available",
    "ACODE-SBX-002": "path outside the workspace",
    "ACODE-SBX-003": "file not found",
    "ACODE-SBX-004": "wrong file type",
    "ACODE-SBX-005": "command could not start",
    "ACODE-SBX-006": "command timed out",
    "ACODE-SBX-007": "invalid tool arguments",
    "ACODE-SBX-008": "outcome unknown: the call was interrupted",
    "ACODE-SBX-009": "edit did not apply",
    "ACODE-SBX-010": "shell syntax refused",
    "ACODE-SBX-011": "command not allowed",
    "ACODE-SBX-012": "command argument refused",
    "ACODE-SBX-013": "protected path",
    "ACODE-SBX-014": "hardlinked file",
    "ACODE-SBX-015": "isolation level not met",
    "ACODE-SBX-016": "search time budget exceeded",
    "ACODE-SBX-017": "no baseline recorded for the session",
    "ACODE-SBX-018": "the session's baseline cannot be recorded or read",
    "ACODE-SBX-019": "call refused: it needs an approval record and has none that matches",
    "ACODE-SBX-020": "call refused: the session's approvals policy denies it",
    "ACODE-SBX-021": "a command changed a protected path; it was restored and the session pauses",
    "ACODE-SBX-022": "a write would put a redaction placeholder where the file holds a secret",
    "ACODE-SBX-023": "the checkpoint before a call could not be taken; the call did not run",
    "ACODE-SBX-024": "checkpoint not found, or the session has none",
    "ACODE-SBX-025": "a restore could not complete; it completes at the next `acode up` or `acode undo`",
    "ACODE-SBX-026": "restore refused: the session is running",
    "ACODE-LLM-001": "model provider not available",
    "ACODE-LLM-002": "scripted responses exhausted",
    "ACODE-LLM-003": "model answer invalid",
    "ACODE-LLM-004": "scripted model file invalid",
    "ACODE-LLM-005": "model server unreachable",
    "ACODE-LLM-006": "model not available on the server",
    "ACODE-LLM-007": "model server answered with an error",
    "ACODE-LLM-008": "model server timed out",
    "ACODE-LLM-009": "remote model server refused by configuration",
    "ACODE-LLM-010": "model server's answer could not be read",
    "ACODE-LLM-011": "model answer cancelled",
    "ACODE-LLM-012": "model answer cut at the token limit",
    "ACODE-LLM-013": "prompt exceeds the model's context",
    "ACODE-LLM-014": "model server configuration error (permanent)",
    "ACODE-LLM-015": "the server ignored the tools",
    "ACODE-LLM-016": "model server refused the request (permanent)",
    "ACODE-STORE-001": "database error",
    "ACODE-STORE-002": "record not found",
    "ACODE-STORE-003": "database schema is newer than this acode",
    "ACODE-STORE-004": "a record this commit depends on is not durable yet",
    "ACODE-SUP-001": "actor failed past its restart intensity",
    "ACODE-SUP-002": "actor did not become ready",
    "ACODE-MCP-001": "an MCP server could not be started, reached or understood",
    "ACODE-MCP-002": "an MCP server exited during a call: the call was not re-run",
    "ACODE-MCP-003": "an MCP tool call did not finish within the server's timeout_s",
    "ACODE-MCP-004": "an MCP tool's definition changed since it was approved: refused until `acode mcp approve`",
    "ACODE-MCP-005": "no such MCP tool on the server (not listed, filtered out, or its name cannot be offered)",
    "ACODE-MCP-006": "invalid mcp.servers entry in the user config",
    "ACODE-MCP-007": "the mcp actor restarted during a call: the call was not re-run",
    "ACODE-MCP-008": "MCP support is not installed (pip install acode[mcp])",
    "ACODE-MCP-009": "the MCP pins file cannot be read or written",
    "ACODE-CFG-001": "invalid configuration",
    "ACODE-CFG-002": "configuration contradicts itself",
    "ACODE-CFG-003": "setting acode cannot honour",
    "ACODE-CFG-004": "acode home or database not private to you (another user owns it)",
    "ACODE-CFG-005": "workspace config would loosen a safety setting: ignored until `acode trust DIR`",
    "ACODE-CFG-006": "hook condition does not compile (syntax, unknown name, type mismatch, invalid regex, limits)",
    "ACODE-CLI-001": "acode is already running",
    "ACODE-CLI-002": "session not found",
    "ACODE-CLI-003": "invalid argument",
    "ACODE-CLI-004": "session cannot do that in its current state",
    "ACODE-CLI-005": "answers do not match the session's questions",
    "ACODE-CLI-006": "the workspace is held by an unfinished session",
    "ACODE-CLI-007": "resume sooner than 1 s after a pause (seed 002: pause and resume at least 1 s apart)",
    "ACODE-CLI-008": "a plan waiting for review continues with approve or replan, not resume",
    "ACODE-CLI-009": "steering or feedback text empty or too long",
    "ACODE-CLI-010": "undo refused: the session is running (pause it first)",
    "ACODE-CLI-011": "undo needs a confirmation: run it on a terminal, or pass --yes",
    "ACODE-CLI-012": "acode show: no such stage, or a cycle the session never reached",
    "ACODE-CLI-013": "the OpenTelemetry collector did not take an exported trace (acode export)",
    # MCP tools in the pipeline (the session's servers, the executor, the sandbox, `acode mcp approve`)
    "ACODE-MCP-010": "the session names MCP servers but the MCP extra is not installed (pip install acode[mcp])",
    "ACODE-MCP-011": "an MCP call was interrupted (sandbox or mcp actor died): outcome unknown, not run again",
    "ACODE-MCP-012": "MCP tools unavailable this turn (the mcp service is down or a server failed)",
    "ACODE-MCP-013": "MCP call refused: no server of the session lists that tool",
    "ACODE-MCP-014": "acode mcp approve: no such server or tool, or nothing changed to approve",
    "ACODE-MCP-015": "acode mcp approve needs a confirmation: run it on a terminal, or pass --yes",
    "ACODE-MCP-016": "an MCP call that may have acted was interrupted: the session pauses for a human (never re-run)",
    "ACODE-MCP-017": "a write refused: the step names an MCP tool the try has not called yet (call it first)",
    "ACODE-MCP-020": "acode mcp serve: the MCP SDK is not installed (pip install acode[mcp])",
}


class ErrorInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An error as it crosses a process boundary."""

    code: str
    message: str
    retryable: bool = False


def with_code(message: str, code: str) -> str:
    """``"<message> (<code>)"``, unless the message already names the code (a step's
    summary often does): every place that shows an error to a human goes through here."""
    return message if not code or code in message else f"{message} ({code})"


class AcodeError(Exception):
    """Base of every acode error; ``str()`` is ``"<message> (<code>)"``."""

    default_code = "ACODE-ORCH-001"
    retryable = False

    def __init__(self, message: str, *, code: str | None = None, retryable: bool | None = None):
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        if retryable is not None:
            self.retryable = retryable

    def __str__(self) -> str:
        return with_code(self.message, self.code)

    def info(self) -> ErrorInfo:
        return ErrorInfo(code=self.code, message=self.message, retryable=self.retryable)


class ProtocolError(AcodeError, ValueError):
    default_code = "ACODE-PROTO-002"


class TransportError(AcodeError, ConnectionError):
    default_code = "ACODE-NET-002"
    retryable = True


class RequestTimeout(TransportError, TimeoutError):
    default_code = "ACODE-NET-001"


class NotRunning(TransportError):
    default_code = "ACODE-NET-003"


class ConfigError(AcodeError, ValueError):
    default_code = "ACODE-CFG-001"


class OrchestrationError(AcodeError):
    default_code = "ACODE-ORCH-001"


class StageTimeout(OrchestrationError, TimeoutError):
    default_code = "ACODE-ORCH-002"


class CycleLimitReached(OrchestrationError):
    default_code = "ACODE-ORCH-003"


class TransitionError(OrchestrationError, ValueError):
    default_code = "ACODE-ORCH-006"


class WorkPaused(OrchestrationError):
    """A stage reached a safe point after the user paused its session: it stops there
    (what it recorded is replayed when the session resumes)."""

    default_code = "ACODE-ORCH-010"


class BudgetExhausted(OrchestrationError):
    """A call would cross one of the session's limits (protocol.policy.budget): the stage stops
    before it, what it recorded is replayed when a human extends the budget."""

    default_code = "ACODE-ORCH-013"


class HookStopped(OrchestrationError):
    """A hook of the user's decided the stage stops here: pause (ACODE-ORCH-014), abort
    (ACODE-ORCH-015) or restart the stage (ACODE-ORCH-016)."""

    default_code = "ACODE-ORCH-014"


class PlanError(AcodeError, ValueError):
    default_code = "ACODE-PLAN-004"


class ExecutionError(AcodeError):
    default_code = "ACODE-EXEC-001"


class AnomalyPause(ExecutionError):
    """The model went off the rails past a note and a fresh window (protocol.policy.anomalies): the
    stage stops at the step and the session pauses ``anomaly`` with the evidence."""

    default_code = "ACODE-EXEC-011"


class SandboxError(AcodeError):
    default_code = "ACODE-SBX-001"


class PathEscapeError(SandboxError, PermissionError):
    default_code = "ACODE-SBX-002"


class ModelError(AcodeError):
    default_code = "ACODE-LLM-001"


class StorageError(AcodeError):
    default_code = "ACODE-STORE-001"


class NotFoundError(StorageError, LookupError):
    default_code = "ACODE-STORE-002"


class SupervisionError(AcodeError):
    default_code = "ACODE-SUP-001"


class McpError(AcodeError):
    default_code = "ACODE-MCP-001"


class CliError(AcodeError):
    default_code = "ACODE-CLI-003"


_BY_AREA: dict[str, type[AcodeError]] = {
    "PROTO": ProtocolError,
    "NET": TransportError,
    "CFG": ConfigError,
    "ORCH": OrchestrationError,
    "PLAN": PlanError,
    "EXEC": ExecutionError,
    "SBX": SandboxError,
    "LLM": ModelError,
    "STORE": StorageError,
    "SUP": SupervisionError,
    "MCP": McpError,
    "CLI": CliError,
}
_BY_CODE: dict[str, type[AcodeError]] = {
    "ACODE-NET-001": RequestTimeout,
    "ACODE-NET-003": NotRunning,
    "ACODE-ORCH-002": StageTimeout,
    "ACODE-ORCH-003": CycleLimitReached,
    "ACODE-ORCH-006": TransitionError,
    "ACODE-ORCH-010": WorkPaused,
    "ACODE-ORCH-013": BudgetExhausted,
    "ACODE-ORCH-014": HookStopped,
    "ACODE-ORCH-015": HookStopped,
    "ACODE-ORCH-016": HookStopped,
    "ACODE-EXEC-011": AnomalyPause,
    "ACODE-SBX-002": PathEscapeError,
    "ACODE-STORE-002": NotFoundError,
}


def from_info(info: ErrorInfo) -> AcodeError:
    """Rebuild the exception an :class:`ErrorInfo` describes (unknown codes → AcodeError)."""
    cls = _BY_CODE.get(info.code)
    if cls is None:
        area = info.code.split("-")[1] if info.code.count("-") >= 2 else ""
        cls = _BY_AREA.get(area, AcodeError)
    return cls(info.message, code=info.code, retryable=info.retryable)
