"""One tool call, from a validated RunTool to its ToolResult.

:class:`ToolCall` checks the request before anything runs: the tool must be a sandbox
tool (ACODE-SBX-001, naming those that are), its arguments must decode into the tool's
Struct (ACODE-SBX-007), and the workspace must be an existing directory (ACODE-SBX-004).
The internal tools (``baseline_workspace``, ``diff_workspace``: :mod:`actors.sandbox.tools.baseline`;
``search_code_terms``: :mod:`actors.sandbox.tools.search`)
are accepted too, but never named in a refusal: the model is not to learn of them.
An MCP tool (``mcp__SERVER__TOOL``) is resolved instead of decoded
(:meth:`actors.sandbox.mcpcalls.McpCalls.resolve`: the session's stored server and the
definition the ``mcp`` actor lists; its arguments are the JSON object the model sent,
left for the server to validate), and run by forwarding it to the ``mcp`` service; its
class and whether it may run again come from the same resolution.
A refusal is kept and becomes the call's result, because the model must see it; it is
not an exception to the caller. The same applies to every :class:`SandboxError` a tool
raises and to OS errors while a tool runs (ACODE-EXEC-002). Only infrastructure failures,
which the journal meets while talking to persistence, propagate as exceptions.
"""

from __future__ import annotations

import time
from typing import assert_never, cast

import msgspec

from actors.sandbox.confinement import policy
from actors.sandbox.confinement.confine import Workspace, quote
from actors.sandbox.mcpcalls import McpCalls, McpTarget
from actors.sandbox.tools import files, search
from actors.sandbox.tools.baseline import Baselines
from actors.sandbox.tools.output import Outcome
from actors.sandbox.tools.terminal import Terminal, command_policy_of
from protocol.basics.redact import redact_value
from protocol.calls.mcp import PREFIX as MCP_PREFIX
from protocol.calls.tools import (
    INTERNAL_TOOLS,
    SANDBOX_TOOLS,
    BaselineWorkspace,
    CreateDirectory,
    DiffWorkspace,
    ListDirectory,
    ModifyFile,
    ReadFile,
    Risk,
    RunTerminal,
    SearchCode,
    SearchCodeTerms,
    StepComplete,
    StepFailed,
    ToolArgs,
    WriteFile,
    decode_args,
    risk_of,
)
from protocol.errors import AcodeError, ErrorInfo, SandboxError
from protocol.messages import RunTool
from protocol.plans.results import ToolResult

__all__ = ["ToolCall"]

_TARGET_CHARS = 200


def _decode(request: RunTool) -> ToolArgs:
    if request.tool not in SANDBOX_TOOLS | INTERNAL_TOOLS:
        raise SandboxError(f"tool {quote(request.tool, 60)} is not available; available: "
                           f"{', '.join(sorted(SANDBOX_TOOLS))}", code="ACODE-SBX-001")
    try:
        return cast(ToolArgs, decode_args(request.tool, request.arguments, internal=True))
    except msgspec.ValidationError as exc:
        raise SandboxError(f"arguments of {request.tool} rejected: {exc}; call it again with arguments "
                           "that match its schema", code="ACODE-SBX-007") from exc


class ToolCall:
    """A RunTool checked and ready: ``args`` and ``workspace`` are set unless ``refusal`` is.
    ``hidden``: paths no tool may reach (acode's home, :mod:`actors.sandbox.confinement.protected`)."""

    def __init__(self, request: RunTool, *, hidden: tuple[str, ...] = (), mcp: McpCalls | None = None):
        self.request = request
        self.args: ToolArgs | None = None
        self.workspace: Workspace | None = None
        self.refusal: SandboxError | None = None
        self.mcp: McpTarget | None = None  # an MCP tool's call: what it names (the module)
        self._mcp = mcp
        try:
            if request.tool.startswith(MCP_PREFIX):
                self.mcp = self._resolve(request, mcp)
            else:
                self.args = _decode(request)
            self.workspace = Workspace(request.workspace, hidden=hidden)
        except SandboxError as exc:
            self.refusal = exc

    @staticmethod
    def _resolve(request: RunTool, mcp: McpCalls | None) -> McpTarget:
        if mcp is None:
            raise SandboxError(f"{request.tool} is an MCP tool, and this sandbox has no MCP service",
                               code="ACODE-MCP-013")
        try:
            return mcp.resolve(request)
        except SandboxError:
            raise
        except AcodeError as exc:  # the mcp service or persistence could not be asked: the call does not run
            raise SandboxError(f"{request.tool} cannot run now: {exc.message}", code=exc.code) from exc

    def close(self) -> None:
        if self.workspace is not None:
            self.workspace.close()

    def __enter__(self) -> ToolCall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def target(self) -> str:
        """What the call acts on (a path or a command; an MCP call's arguments), short enough for an event."""
        if self.mcp is not None:
            return self.mcp.describe(self.request.arguments)
        match self.args:
            case RunTerminal(command=text) | ReadFile(path=text) | WriteFile(path=text) | ModifyFile(path=text) \
                    | CreateDirectory(path=text) | ListDirectory(path=text) | SearchCode(query=text):
                return text if len(text) <= _TARGET_CHARS else text[:_TARGET_CHARS] + "…"
            case SearchCodeTerms(queries=queries):
                text = " | ".join(queries)
                return text if len(text) <= _TARGET_CHARS else text[:_TARGET_CHARS] + "…"
            case StepComplete() | StepFailed() | BaselineWorkspace() | DiffWorkspace() | None:
                return ""
            case _:
                assert_never(self.args)

    @property
    def risk(self) -> Risk:
        """The call's risk class: a command's comes from what it runs (``rm`` is destructive,
        ``pip install`` network), a refused command stays ``execute``; an MCP call's from its
        resolution (unresolved: destructive)."""
        if self.request.tool.startswith(MCP_PREFIX):
            return self.mcp.risk if self.mcp is not None else "destructive"
        if isinstance(self.args, RunTerminal):
            try:
                return policy.check(self.args.command, command_policy_of(self.request.policy)).risk
            except SandboxError:
                return "execute"
        return risk_of(self.request.tool)

    @property
    def rerun_safe(self) -> bool:
        """A call that changes nothing anywhere (a read, a listing, a search, the diff against
        the baseline), or the session's baseline (the first record stands; a second call moves
        nothing): run again whenever no result is journaled, so its intent need not be
        journaled first. An MCP call only when it is read-class and rerun-safe (a trusted
        read-only tool): any other, idempotent ones included, is journaled before it runs and
        gets its checkpoint, since a server that writes may change the workspace."""
        if self.mcp is not None:
            return self.mcp.rerun_safe and self.mcp.risk == "read"
        return isinstance(self.args, (ReadFile, ListDirectory, SearchCode, SearchCodeTerms, DiffWorkspace,
                                      BaselineWorkspace))

    def image(self) -> str | None:
        """Pre-image of the file a write would change: sha256 hex, ``"absent"`` or None."""
        if self.workspace is None or not isinstance(self.args, (WriteFile, ModifyFile)):
            return None
        return files.image(self.workspace, self.args.path)

    def run(self, terminal: Terminal, baselines: Baselines | None = None) -> ToolResult:
        start = time.monotonic()
        try:
            if self.refusal is not None:
                raise self.refusal
            outcome = self._run(terminal, baselines)
        except SandboxError as exc:
            outcome = Outcome(error=exc.info())
        except OSError as exc:
            outcome = Outcome(error=ErrorInfo(code="ACODE-EXEC-002",
                                              message=f"{self.request.tool} failed: {exc}; check the workspace"))
        return self.result(outcome, duration_ms=(time.monotonic() - start) * 1000)

    def _run(self, terminal: Terminal, baselines: Baselines | None) -> Outcome:
        ws, max_bytes = self.workspace, self.request.output_limit_bytes
        assert ws is not None
        if self.mcp is not None:
            assert self._mcp is not None  # a target is resolved only with the service
            return self._mcp.call(self.mcp, self.request)
        match self.args:
            case ReadFile() as args:
                return files.read_file(ws, args, max_bytes)
            case WriteFile() as args:
                return files.write_file(ws, args)
            case ModifyFile() as args:
                return files.modify_file(ws, args)
            case CreateDirectory() as args:
                return files.create_directory(ws, args)
            case ListDirectory() as args:
                return search.list_directory(ws, args, max_bytes)
            case SearchCode() as args:
                return search.search_code(ws, args, max_bytes)
            case SearchCodeTerms() as args:
                return search.search_code_terms(ws, args, max_bytes)
            case RunTerminal() as args:
                # the model may ask for less time than the executor allows, never more
                timeout = min(args.timeout_s or self.request.timeout_s, self.request.timeout_s)
                return terminal.run(ws, args, timeout_s=timeout, max_bytes=max_bytes, policy=self.request.policy)
            case BaselineWorkspace():
                return self._baselines(baselines).record(ws, self.request.session_id)
            case DiffWorkspace() as args:
                return self._baselines(baselines).diff(ws, self.request.session_id, args.max_bytes or max_bytes)
            case StepComplete() | StepFailed() | None:
                raise AssertionError(f"{self.request.tool} is not a sandbox tool; _decode refuses it")
            case _:
                assert_never(self.args)

    def _baselines(self, baselines: Baselines | None) -> Baselines:
        if baselines is None:
            raise SandboxError(f"{self.request.tool} needs the sandbox actor's baseline store, and this sandbox has "
                               "none", code="ACODE-SBX-001")
        return baselines

    def result(self, outcome: Outcome, *, duration_ms: float = 0.0) -> ToolResult:
        """The ToolResult for ``outcome`` (each tool has already capped its own output); an MCP
        call the ``mcp`` actor did not live to answer (ACODE-MCP-011) has an unknown outcome."""
        unknown = outcome.error is not None and outcome.error.code == "ACODE-MCP-011"
        # secrets a file or command printed never reach the model, the journal or an event
        return redact_value(ToolResult(key=self.request.key, tool=self.request.tool, ok=outcome.ok,
                                       output=outcome.output,
                          error=outcome.error, exit_code=outcome.exit_code, duration_ms=duration_ms,
                          risk=self.risk, path=outcome.path, isolation=outcome.isolation,
                          changes=outcome.changes, sha256=outcome.sha256,
                          outcome="unknown" if unknown else "done"))
