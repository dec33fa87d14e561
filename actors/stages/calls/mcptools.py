"""The session's MCP tools as the executor offers them: listed before each model turn.

A session submitted with MCP servers (``SessionSettings.mcp_servers``, stored with it)
has the executor ask the ``mcp`` service for their tools (:class:`McpListTools`) before
each model turn; a session without any asks nothing. The listing is the actor's (it starts
and restarts the servers), so a tool that vanished with a dead server and came back after
its restart is offered again at the next turn.

- **Offered**: the tools in state ``offered``, each as a function definition named
  ``mcp__SERVER__TOOL``. Its description is the server's, untrusted: hidden characters
  stripped, cut to :data:`DESCRIPTION_CHARS` (:data:`COMPACT_DESCRIPTION_CHARS` when the
  session's definitions are compact: a small context), fenced with the dispatch's nonce
  (:mod:`actors.stages.prompting.untrusted`) after one line acode writes naming the server. Its input
  schema passes through (its strings stripped the same way) unless it is larger than
  :data:`SCHEMA_CHARS`, when a bare object schema stands in for it (the server validates
  the arguments either way).
- **Risk**: each listed tool's class is :func:`protocol.calls.mcp.risk_of_tool` of its definition
  and the server's configuration as the session stored it (:attr:`McpOffer.risks`), what
  the autonomy step and the hooks see; the sandbox computes it again for itself.
- **Refused before the pipeline** (:meth:`McpOffer.check`, answered as a correction, like
  an unknown tool): arguments that are not a JSON object (ACODE-EXEC-007); a tool whose
  definition changed since it was pinned (state ``changed``: not offered; the model may still
  name it), with the ``mcp`` actor's code ACODE-MCP-004 and the command a human runs,
  ``acode mcp approve SERVER TOOL``; a name no server of the session lists (ACODE-MCP-013).
- **The one-file step style** (the small profile's) offers no tools, so a step whose
  request names one of the session's servers or tools keeps the tool loop
  (:meth:`McpOffer.asked_for`): on the real 1.5B model, "look it up with the notes tool,
  then write answer.txt" had become a one-file step and the lookup never ran.
- **Unavailable**: when the ``mcp`` service does not answer, or a server is ``failed`` or
  ``stopped``, the turn goes on without those tools and the model is told once, in a
  note (ACODE-MCP-012); no pause. A server that comes back is offered again, and told
  again should it fail again.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

import msgspec

from actors.stages.prompting.untrusted import strip_hidden
from actors.stages.request.context import StageContext
from protocol import codec
from protocol.calls.mcp import (
    PREFIX,
    McpServerRef,
    McpToolDef,
    definition_hash,
    parse_tool_name,
    risk_of_tool,
    tool_name,
)
from protocol.calls.tools import Risk
from protocol.errors import AcodeError
from protocol.messages import McpListTools, McpTools
from protocol.plans.plan import PlanStep, PlanTask
from protocol.plans.results import ModelToolCall
from protocol.sessions.profiles import compact_tools

__all__ = ["COMPACT_DESCRIPTION_CHARS", "DESCRIPTION_CHARS", "SCHEMA_CHARS", "Listed", "McpOffer", "is_mcp"]

MENTIONED = 8  # tools named in the step's message (:meth:`McpOffer.named`)
_NAMED_ARGS = 6  # arguments named per tool there
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_WRITTEN_CALL = re.compile(r"\s*(mcp__[A-Za-z0-9-]+__[A-Za-z0-9_-]+)\s*\((.*)\)\s*", re.S)
DESCRIPTION_CHARS = 1_000
COMPACT_DESCRIPTION_CHARS = 300  # compact tool definitions (protocol.sessions.profiles.compact_tools): a small context
SCHEMA_CHARS = 8_000
FIRST_LIST_TIMEOUT_S = 30.0  # the first listing of a stage may start the servers
LIST_TIMEOUT_S = 5.0
DOWN_LIST_TIMEOUT_S = 2.0  # after the service did not answer: a turn waits little for it


def is_mcp(name: str) -> bool:
    return name.startswith(PREFIX)


class Listed(NamedTuple):
    """One tool as the last listing had it: its server, its own name, its class and hash."""

    server: str
    tool: str
    risk: Risk
    hash: str
    state: str
    timeout_s: float


def step_words(request: str, task: PlanTask, step: PlanStep) -> str:
    """The user's request and the step's and its task's words: where a step names MCP tools."""
    return f"{request}\n{task.title} {task.description}\n{step.title} {step.description}"


def _word(name: str, text: str) -> bool:
    """Whether ``name`` stands in ``text`` as a word of its own (any case; ``-`` and ``_`` join)."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE) is not None


def _plain(names: Any) -> list[str]:
    """The names in ``names`` that are plainly names (the server's words, said unfenced)."""
    return [n for n in names or () if isinstance(n, str) and _PLAIN_NAME.fullmatch(n)][:_NAMED_ARGS]


def _clean(value: Any, nonce: str) -> Any:
    """``value`` (a schema) with every string stripped of hidden characters and the nonce."""
    if isinstance(value, str):
        return strip_hidden(value).replace(nonce, "")
    if isinstance(value, dict):
        return {_clean(k, nonce): _clean(v, nonce) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, nonce) for v in value]
    return value


class McpOffer:
    """The MCP tools of one executor stage request (see the module)."""

    def __init__(self, ctx: StageContext):
        self.ctx = ctx
        self.servers: dict[str, McpServerRef] = {s.name: s for s in ctx.request.settings.mcp_servers}
        self.definitions: list[dict[str, Any]] = []
        self.listed: dict[str, Listed] = {}
        self._descriptions: dict[str, str] = {}  # offered tool -> the server's description, as listed
        self._told: set[str] = set()  # servers the model was told are unavailable (until they come back)
        self._answered = False  # the service answered a listing of this stage
        self._down = False  # the last listing got no answer
        self._cap = COMPACT_DESCRIPTION_CHARS if compact_tools(ctx.request.settings) else DESCRIPTION_CHARS

    @property
    def risks(self) -> dict[str, Risk]:
        """Each listed tool's class (what :func:`protocol.calls.autonomy.risk_of_call` takes)."""
        return {name: listed.risk for name, listed in self.listed.items()}

    @property
    def chars(self) -> int:
        """What the offered definitions take of the prompt, in characters."""
        return len(msgspec.json.encode(self.definitions)) if self.definitions else 0

    def refresh(self) -> list[str]:
        """List the session's tools now (nothing without servers); the notes the model gets
        this turn about servers newly unavailable."""
        if not self.servers:
            return []
        timeout = DOWN_LIST_TIMEOUT_S if self._down else LIST_TIMEOUT_S if self._answered else FIRST_LIST_TIMEOUT_S
        request = self.ctx.request
        try:
            reply: McpTools = self.ctx.clients.call(
                "mcp", McpListTools(session_id=request.session_id, workspace=request.workspace,
                                    servers=list(self.servers.values())),
                timeout=timeout, decoder=codec.MCP_REPLY, session_id=request.session_id)
        except AcodeError as exc:
            self._down = True
            self.definitions = []  # nothing is offered; what was listed keeps its class for a call named anyway
            self.ctx.log.warning("mcp_tools_unavailable", code=exc.code, error=exc.message[:300])
            return self._unavailable(list(self.servers), f"the MCP service did not answer ({exc.code})")
        self._down, self._answered = False, True
        self.listed, self.definitions, self._descriptions = {}, [], {}
        for info in reply.tools:
            self._add(info.definition, info.state)
        failed = {s.name: s for s in reply.servers if s.state in ("failed", "stopped")}
        for name in list(self._told):
            if name not in failed:
                self._told.discard(name)  # it came back: told again should it fail again
        notes = []
        for name, state in failed.items():
            why = f"{state.error.message} ({state.error.code})" if state.error is not None else state.state
            notes += self._unavailable([name], why)
        return notes

    def _add(self, definition: McpToolDef, state: str) -> None:
        server = self.servers.get(definition.server)
        name = tool_name(definition.server, definition.name)
        if server is None or name is None or state == "filtered":
            return
        self.listed[name] = Listed(server=server.name, tool=definition.name,
                                   risk=risk_of_tool(definition, server.config), hash=definition_hash(definition),
                                   state=state, timeout_s=server.config.timeout_s)
        if state == "offered":
            self.definitions.append(self._definition(name, definition))
            self._descriptions[name] = definition.description

    def _definition(self, name: str, definition: McpToolDef) -> dict[str, Any]:
        nonce = self.ctx.fence.nonce
        text = strip_hidden(definition.description)
        if len(text) > self._cap:
            text = text[:self._cap] + f"… [{len(text) - self._cap} more characters cut]"
        schema: dict[str, Any] = _clean(definition.input_schema, nonce) if isinstance(definition.input_schema,
                                                                                     dict) else {}
        note = ""
        if len(json.dumps(schema, default=str)) > SCHEMA_CHARS:
            schema, note = {"type": "object"}, " Its input schema is too large to show: pass a JSON object."
        if not schema.get("type"):
            schema = {"type": "object", **schema}
        head = (f"Tool {definition.name} of the MCP server {definition.server} (its description, untrusted, "
                f"follows).{note}")
        described = f"{head}\n{self.ctx.fence.wrap(f'description of {name}', text)}" if text else head
        return {"type": "function", "function": {"name": name, "description": described, "parameters": schema}}

    def meant(self, call: ModelToolCall) -> ModelToolCall | None:
        """The MCP call a small model meant by another tool's call whose one text argument is
        ``mcp__SERVER__TOOL(...)`` (on the real 1.5B model: ``run_command`` with the command
        ``mcp__notes__lookup(acode)``), or None: the parentheses hold a JSON object, or the
        value of the tool's one parameter. Only an offered tool, and only when that is plain."""
        if is_mcp(call.name) or len(call.arguments) != 1:
            return None
        text = next(iter(call.arguments.values()))
        found = _WRITTEN_CALL.fullmatch(text) if isinstance(text, str) else None
        definition = next((d["function"] for d in self.definitions if found and d["function"]["name"] == found[1]),
                          None)
        if found is None or definition is None:
            return None
        inner = found[2].strip()
        try:
            value = json.loads(inner) if inner.startswith("{") else None
        except ValueError:
            value = None
        if not isinstance(value, dict):
            params = definition["parameters"]
            names = params.get("required") or list(params.get("properties") or {})
            if len(names) != 1:
                return None
            value = {names[0]: inner.strip("\"'")}
        return ModelToolCall(id=call.id, name=found[1], arguments=value)

    def ranked(self, words: str) -> list[dict[str, Any]]:
        """The offered definitions, those the words name first (a tool's full ``mcp__`` name, or
        its own name as a word in any case), then the others, each group in listing order: with
        more tools than are shown, the one the user asked for is never among those left out,
        and the example call is of that one."""
        def named(definition: dict[str, Any]) -> bool:
            name = definition["function"]["name"]
            listed = self.listed.get(name)
            return (re.search(rf"{re.escape(name)}(?![\w-])", words) is not None
                    or listed is not None and _word(listed.tool, words))
        first = [d for d in self.definitions if named(d)]
        return first + [d for d in self.definitions if d not in first]

    def named(self, words: str = "", most: int = MENTIONED) -> str:
        """The offered tools in one paragraph for the step's message, with an example call in
        the JSON form small models write ("" when none is offered): the definitions reach the
        model only through the server's chat template, which a small model reads poorly. The
        tools ``words`` (the request and the step) name come first (:meth:`ranked`)."""
        if not self.definitions:
            return ""
        ranked = self.ranked(words)
        shown = [f"{d['function']['name']}({', '.join(_plain(d['function']['parameters'].get('properties')))})"
                 for d in ranked[:most]]
        more = f" and {len(ranked) - most} more" if len(ranked) > most else ""
        first = ranked[0]["function"]
        example = json.dumps({"name": first["name"], "arguments": {
            key: "..." for key in _plain(first["parameters"].get("required"))}})
        return (f"Tools of the user's MCP servers, offered with the others: {', '.join(shown)}{more}. Call one "
                f"like any tool, e.g. {example}")

    def for_planner(self, words: str = "", most: int = MENTIONED) -> str:
        """The offered tools for the planner's message ("" when none): each name with its
        argument names and its description, fenced, cut to :data:`COMPACT_DESCRIPTION_CHARS`,
        those the request (``words``) names first. Untold, the real 1.5B model planned
        ``python -m notes_lookup`` for "look it up with the notes tool", and the executor's
        model ran that instead of the tool."""
        if not self.definitions:
            return ""
        lines = ["The user's MCP tools. The executor calls them as tools, by these names, in any step; they "
                 "are not commands, so never put one in a check or a run_command. A step that needs one names "
                 "it in its description."]
        for definition in self.ranked(words)[:most]:
            function = definition["function"]
            name = function["name"]
            arguments = ", ".join(_plain(function["parameters"].get("properties")))
            listed = self.listed[name]
            text = strip_hidden(self._descriptions.get(name, ""))
            if len(text) > COMPACT_DESCRIPTION_CHARS:
                text = text[:COMPACT_DESCRIPTION_CHARS] + "…"
            lines.append(f"- {name}({arguments}): tool {listed.tool} of the server {listed.server}"
                         + (f"; its description, untrusted:\n{self.ctx.fence.wrap(f'description of {name}', text)}"
                            if text else ""))
        if len(self.definitions) > most:
            lines.append(f"- and {len(self.definitions) - most} more")
        return "\n".join(lines)

    def _unavailable(self, names: list[str], why: str) -> list[str]:
        fresh = [name for name in names if name not in self._told]
        self._told.update(fresh)
        if not fresh:
            return []
        which = ", ".join(fresh)
        return [f"Note: the MCP server{'s' if len(fresh) > 1 else ''} {which} {'are' if len(fresh) > 1 else 'is'} "
                f"unavailable now ({why}); {'their' if len(fresh) > 1 else 'its'} tools are not offered this turn. "
                "Go on with the other tools (ACODE-MCP-012)."]

    def check(self, call: ModelToolCall) -> str | None:
        """Why an ``mcp__`` call cannot run as it is (a correction for the model), or None."""
        if call.invalid_arguments:
            return (f"arguments of {call.name} must be a JSON object; they were {call.invalid_arguments[:200]!r}; "
                    "call it again with a JSON object (ACODE-EXEC-007)")
        listed = self.listed.get(call.name)
        if listed is not None and listed.state == "changed":
            return (f"tool {call.name} is disabled: its definition changed since it was approved; a human must "
                    f"approve the new one with `acode mcp approve {listed.server} {listed.tool}` (ACODE-MCP-004); "
                    "do the step without it")
        if listed is None or not any(d["function"]["name"] == call.name for d in self.definitions):
            parsed = parse_tool_name(call.name)
            where = f"server {parsed[0]!r} is unavailable or lists no such tool" if parsed else "no such MCP tool"
            offered = ", ".join(d["function"]["name"] for d in self.definitions) or "none now"
            return f"tool {call.name[:80]!r} is not available ({where}); MCP tools offered: {offered} (ACODE-MCP-013)"
        return None

    def names(self) -> frozenset[str]:
        """The names offered now (what a call written as text may name)."""
        return frozenset(d["function"]["name"] for d in self.definitions)

    def asked_for(self, request: str, task: PlanTask, step: PlanStep) -> bool:
        """Whether the user's request or the step's words ask for an MCP tool: they name one
        of the session's servers or a listed tool (as a word, any case), or an ``mcp__`` name.
        Such a step keeps the tool loop: the one-file step style offers no tools."""
        if not self.servers:
            return False
        text = step_words(request, task, step)
        if PREFIX in text:
            return True
        names = {*self.servers, *(listed.tool for listed in self.listed.values())}
        return any(_word(name, text) for name in names)

    def required(self, task: PlanTask, step: PlanStep) -> frozenset[str]:
        """The offered tools the step's or its task's words name in full (``mcp__notes__lookup``,
        as the planner writes them when told the tools): a write of the try waits until it
        has called each (:meth:`actors.stages.execution.toolloop.ToolLoopStep._tool_first`)."""
        text = f"{task.title} {task.description}\n{step.title} {step.description}"
        return frozenset(name for name in self.names() if re.search(rf"{re.escape(name)}(?![\w-])", text))

    def hash_of(self, name: str) -> str:
        listed = self.listed.get(name)
        return listed.hash if listed is not None else ""

    def timeout_of(self, name: str) -> float | None:
        listed = self.listed.get(name)
        return listed.timeout_s if listed is not None else None
