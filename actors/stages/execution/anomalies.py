"""Turns that show a model gone off the rails, found from what the turns did (issue 28 §2).

The executor's loop makes one :class:`Observation` per model turn (its token counts,
whether the answer could run, each tool call's outcome, the files written with their
content's hash: the sandbox says it, ``ToolResult.sha256``) and asks :func:`latest` what
the last turn shows. Each finding is an :class:`Anomaly` with its evidence (the file, the
hashes, the turns, the repeated error's head), the turns involved and a severity:
``repeated_invalid`` (the same unusable answer, or the same correction, after whitespace
and numbers are normalised: EXEC-008 catches only exact repeats in a row),
``repeated_error`` (one tool, the same error, whatever its arguments),
``edit_undone`` (A -> B -> A on a file, by write_file or modify_file), ``no_progress``
(turns without new information: :func:`new_information`), ``token_burn`` (tokens per turn
growing without new information), ``output_spike`` (a turn's output far above the median;
a turn that writes a file is long by nature and never counts), ``error_streak`` (turns in
a row, across steps, in which nothing the model tried worked) and, from the verifications
rather than the turns, ``verify_repeat`` (:func:`verify_repeat`). :class:`AnomalyThresholds`
says when each fires.

Each detection re-arms: the evidence it used is spent, and the same kind fires again only
when later turns show it anew. A detection at a turn depends on the turns up to it alone,
so :func:`detect` of a prefix is a prefix of :func:`detect` of the whole. Its severity is a
base per kind (:data:`BASE_SCORE`) plus 10 for each earlier one of its kind, at most 100.
The response climbs a ladder per kind and step (:func:`respond`): a note to the model in its
next turn (:func:`note_text`), a fresh window, a pause ``anomaly``. :func:`health` turns a
session's trouble into one figure.

Everything here is a pure function of its arguments (no clock, no randomness, no I/O), and
the observations come from recorded answers and journaled results: a replay finds the same.
The recorded types (observations, anomalies, thresholds) and :func:`health` are
:mod:`protocol.policy.anomalies`'s, named here too; :mod:`actors.stages.execution.turnwatch` runs all this in
the executor's loop.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from itertools import groupby
from operator import itemgetter
from typing import NamedTuple

from protocol.basics import volatile
from protocol.calls.tools import CONTROL_TOOLS
from protocol.plans.results import ModelToolCall, ToolResult
from protocol.policy.anomalies import (
    BASE_SCORE,
    KINDS,
    Anomaly,
    AnomalyThresholds,
    CallSeen,
    Invalid,
    Kind,
    Observation,
    Response,
    health,
)

__all__ = ["ADVICE", "BASE_SCORE", "EXCERPT_CHARS", "KINDS", "Anomaly", "AnomalyThresholds", "CallSeen", "Invalid",
           "Kind", "Observation", "Response", "VerifyAttempt", "call_seen", "detect", "excerpt", "failed_turn",
           "fingerprint", "health", "invalid_seen", "latest", "new_information", "normalise", "note_text", "respond",
           "verify_repeat"]

EXCERPT_CHARS = 200  # of an error's or a correction's text, in evidence
_CONTENT_WRITES = frozenset({"write_file", "modify_file"})
_WRITES = _CONTENT_WRITES | {"create_directory"}
_PATH_TOOLS = _WRITES | {"read_file", "list_directory"}


class VerifyAttempt(NamedTuple):
    """One verification, as :func:`verify_repeat` reads it (a plain tuple will do)."""

    attempt: int
    failed: Collection[str]  # the failed criteria's labels or fingerprints (empty: it passed)
    changed: bool  # the workspace changed since the verification before


_DIGITS = re.compile(r"\d+")


def normalise(text: str, *, loose: bool = False) -> str:
    """``text`` without what differs between two sightings of the same thing: times,
    temp paths, durations, addresses, pids, line and column numbers; spaces collapsed.
    ``loose`` (a model's answer): every number and letter case too."""
    text = volatile.normalise(text, (*volatile.VOLATILE, *volatile.POSITIONS))
    if loose:
        text = _DIGITS.sub("#", text).lower()
    return text


def fingerprint(text: str, *, loose: bool = False) -> str:
    return _sha(normalise(text, loose=loose))[:16]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def excerpt(text: str, *, tail: bool = False) -> str:
    """``text`` on one line, cut to :data:`EXCERPT_CHARS` (``tail``: its end, where a
    failed command says what failed)."""
    flat = " ".join(text.split())
    if len(flat) <= EXCERPT_CHARS:
        return flat
    return "…" + flat[-EXCERPT_CHARS + 1:] if tail else flat[:EXCERPT_CHARS - 1] + "…"


def invalid_seen(answer: str, correction: str) -> Invalid:
    """An unusable answer (its text and its calls' raw text) and the correction sent for it."""
    return Invalid(answer=fingerprint(answer, loose=True), correction=fingerprint(correction, loose=True),
                   said=excerpt(correction))


def call_seen(call: ModelToolCall, result: ToolResult | None, *, sha: str = "", before: str = "") -> CallSeen:
    """A call and its result (None: denied). ``sha``/``before``: the written file's content
    hashes when the caller knows them; else a successful write's ``sha`` is the one the
    sandbox said (``result.sha256``), or, in a result journaled before it said one, a
    write_file's content's (a modify_file's then stays unknown)."""
    target = ""
    if call.name in _PATH_TOOLS:  # the sandbox's form of the path when it ran, else the model's
        target = (result.path if result is not None else "") or str(call.arguments.get("path", ""))
    args = _sha(json.dumps(call.arguments, sort_keys=True, default=str))[:16]
    if result is None:
        return CallSeen(name=call.name, target=target, args=args, outcome="denied")
    if result.ok:
        content = call.arguments.get("content")
        sha = sha or (result.sha256 if call.name in _CONTENT_WRITES else "")
        if not sha and call.name == "write_file" and isinstance(content, str):
            sha = _sha(content)
        return CallSeen(name=call.name, target=target, args=args, result=fingerprint(result.output), sha=sha,
                        before=before)
    error = result.error
    text = error.message if error is not None else result.output
    return CallSeen(name=call.name, target=target, args=args, outcome="error", result=fingerprint(text),
                    code=error.code if error is not None else f"exit {result.exit_code}",
                    said=excerpt(text, tail=error is None))


def new_information(observations: Sequence[Observation]) -> list[bool]:
    """Whether each turn brought something new: a write that changed a file (or of unknown
    result), or a call whose result (a file tool's: of that file) was not seen before in the
    same try of the same step, failures included (a failing test is what a fix starts from).
    A failed write, a denied call, step_complete and an unusable answer bring nothing."""
    content: dict[str, str] = {}  # path -> sha of its last known content
    seen: dict[tuple[str, int], set[tuple[str, str, str]]] = {}
    out: list[bool] = []
    for obs in observations:
        known = seen.setdefault((obs.step, obs.attempt), set())
        new = False
        for call in obs.calls:
            if call.name in CONTROL_TOOLS or call.outcome == "denied":
                continue
            if call.name in _CONTENT_WRITES:
                if call.outcome == "ok":
                    new = new or not call.sha or content.get(call.target, call.before) != call.sha
                    if call.sha:
                        content[call.target] = call.sha
                continue
            key = (call.name, call.target, call.result)
            if not (call.name in _WRITES and call.outcome == "error") and key not in known:
                known.add(key)
                new = True
        out.append(new)
    return out


class _Found(NamedTuple):
    at: int  # the index of the observation it fired at
    kind: Kind
    evidence: str
    turns: tuple[int, ...]


def detect(observations: Sequence[Observation], thresholds: AnomalyThresholds = AnomalyThresholds()) -> list[Anomaly]:
    """Every anomaly the turns show, in the order they fired (by turn, then :data:`KINDS`)."""
    return [anomaly for _, anomaly in _detect(observations, thresholds)]


def latest(observations: Sequence[Observation], thresholds: AnomalyThresholds = AnomalyThresholds()) -> list[Anomaly]:
    """The anomalies that fired at the last turn: what a loop asks after each turn."""
    return [anomaly for index, anomaly in _detect(observations, thresholds) if index == len(observations) - 1]


def _detect(observations: Sequence[Observation], thresholds: AnomalyThresholds) -> list[tuple[int, Anomaly]]:
    news = new_information(observations)
    found = [*_repeated_invalid(observations, thresholds), *_repeated_error(observations, thresholds),
             *_edit_undone(observations, thresholds), *_no_progress(observations, news, thresholds),
             *_token_burn(observations, news, thresholds), *_output_spike(observations, thresholds),
             *_error_streak(observations, thresholds)]
    found.sort(key=lambda f: (f.at, KINDS.index(f.kind)))
    scored = _scored([(f.kind, f.evidence, f.turns, observations[f.at].step) for f in found])
    return [(f.at, anomaly) for f, anomaly in zip(found, scored, strict=True)]


def _scored(found: Iterable[tuple[Kind, str, tuple[int, ...], str]]) -> list[Anomaly]:
    earlier: Counter[Kind] = Counter()
    out = []
    for kind, evidence, turns, step in found:
        out.append(Anomaly(kind=kind, evidence=evidence, turns=turns, step=step,
                           score=min(100, BASE_SCORE[kind] + 10 * earlier[kind])))
        earlier[kind] += 1
    return out


def _where(observations: Sequence[Observation], indexes: Sequence[int]) -> str:
    """``step T1/S1 turns 3, 4; step T1/S2 turn 1``."""
    pairs = dict.fromkeys((observations[i].step, observations[i].turn) for i in indexes)
    parts = []
    for step, group in groupby(pairs, itemgetter(0)):
        turns = [str(turn) for _, turn in group]
        parts.append(f"step {step} turn{'s' * (len(turns) > 1)} {', '.join(turns)}")
    return "; ".join(parts)


def _turns(observations: Sequence[Observation], indexes: Iterable[int]) -> tuple[int, ...]:
    return tuple(turn for _, turn in dict.fromkeys((observations[i].step, observations[i].turn)
                                                   for i in sorted(indexes)))


def _repeated_invalid(observations: Sequence[Observation], limit: AnomalyThresholds) -> Iterator[_Found]:
    counts: dict[tuple[str, str, str], list[int]] = {}  # (step, answer|correction, fingerprint) -> indexes
    for i, obs in enumerate(observations):
        if obs.invalid is None:
            continue
        keys = [(obs.step, which, printed) for which, printed in (("answer", obs.invalid.answer),
                                                                  ("correction", obs.invalid.correction)) if printed]
        hit: tuple[str, list[int]] | None = None
        for key in keys:
            counts.setdefault(key, []).append(i)
            if hit is None and len(counts[key]) >= limit.repeated_invalid:
                hit = (key[1], counts[key])
        if hit is None:
            continue
        which, indexes = hit
        for key in keys:
            counts[key] = []
        what = "the same unusable answer" if which == "answer" else "unusable answers that got the same correction"
        yield _Found(i, "repeated_invalid", f"{what} {len(indexes)} times ({_where(observations, indexes)}); "
                                            f"the correction: '{obs.invalid.said}'", _turns(observations, indexes))


def _repeated_error(observations: Sequence[Observation], limit: AnomalyThresholds) -> Iterator[_Found]:
    counts: dict[tuple[str, str, str, str], list[tuple[int, str]]] = {}  # (step, tool, code, text) -> (index, args)
    for i, obs in enumerate(observations):
        for call in obs.calls:
            if call.outcome != "error":
                continue
            key = (obs.step, call.name, call.code, call.result)
            seen = counts.setdefault(key, [])
            seen.append((i, call.args))
            if len(seen) >= limit.repeated_error:
                counts[key] = []
                indexes = [index for index, _ in seen]
                varied = len({args for _, args in seen})
                args = f", with {varied} different arguments" if varied > 1 else ", with the same arguments"
                yield _Found(i, "repeated_error", f"{call.name} failed {len(seen)} times with the same error "
                                                  f"({call.code or 'no code'}{args}; {_where(observations, indexes)})"
                                                  f": '{call.said}'", _turns(observations, indexes))


def _edit_undone(observations: Sequence[Observation], limit: AnomalyThresholds) -> Iterator[_Found]:
    states: dict[str, list[tuple[str, int | None]]] = {}  # path -> (sha, index of the write; None: found so)
    undone: Counter[str] = Counter()
    for i, obs in enumerate(observations):
        for call in obs.calls:
            if call.outcome != "ok" or call.name not in _CONTENT_WRITES or not call.sha:
                continue
            history = states.setdefault(call.target, [])
            if call.before and (not history or history[-1][0] != call.before):
                history.append((call.before, None))
            if history and history[-1][0] == call.sha:  # written as it was: nothing changed, nothing undone
                continue
            back = next((n for n in range(len(history) - 1, -1, -1) if history[n][0] == call.sha), None)
            history.append((call.sha, i))
            if back is None:
                continue
            undone[call.target] += 1
            if undone[call.target] < limit.edits_undone:
                continue
            undone[call.target] = 0
            was, at = history[back]
            writes = [n for _, n in history[back:] if n is not None]
            since = f"its content of turn {observations[at].turn}" if at is not None else "its content before"
            chain = " -> ".join(sha[:8] for sha, _ in history[back:])
            yield _Found(i, "edit_undone", f"{call.target} went back to {since} ({was[:8]}) at turn {obs.turn}, "
                                           f"undoing the writes between ({chain}; {_where(observations, writes)})",
                         _turns(observations, writes))


def _no_progress(observations: Sequence[Observation], news: list[bool], limit: AnomalyThresholds
                 ) -> Iterator[_Found]:
    run: list[int] = []
    for i, new in enumerate(news):
        run = [] if new else [*run, i]
        if len(run) < limit.no_progress:
            continue
        did = Counter(what for n in run for what in [c.name + (" (failed)" if c.outcome == "error" else "")
                                                     for c in observations[n].calls] or ["no call that ran"])
        tally = ", ".join(f"{what} x{count}" for what, count in did.items())
        yield _Found(i, "no_progress", f"{len(run)} turns without a changed file or anything not seen before "
                                       f"({_where(observations, run)}): {tally}", _turns(observations, run))
        run = []


def _token_burn(observations: Sequence[Observation], news: list[bool], limit: AnomalyThresholds
                ) -> Iterator[_Found]:
    run: list[int] = []
    for i, obs in enumerate(observations):
        last = observations[run[-1]] if run else None
        grows = last is not None and (last.step, last.attempt) == (obs.step, obs.attempt) and _cost(obs) > _cost(last)
        run = [] if news[i] or not obs.tokens_in else [*run, i] if grows else [i]
        window = run[-limit.burn_turns:]
        costs = [_cost(observations[n]) for n in window]
        if len(window) == limit.burn_turns and costs[-1] >= limit.burn_growth * costs[0]:
            yield _Found(i, "token_burn", f"tokens per turn grew {' -> '.join(map(str, costs))} over "
                                          f"{len(window)} turns without new information "
                                          f"({_where(observations, window)})", _turns(observations, window))
            run = []


def _cost(obs: Observation) -> int:
    return obs.tokens_in + obs.tokens_out


def _output_spike(observations: Sequence[Observation], limit: AnomalyThresholds) -> Iterator[_Found]:
    before: list[int] = []
    for i, obs in enumerate(observations):
        out = obs.tokens_out
        writes = any(c.name in _CONTENT_WRITES for c in obs.calls)  # a whole file is long by nature
        if out and not writes and len(before) >= limit.spike_history:
            median = statistics.median(before)
            if out > limit.spike_factor * median and out > limit.spike_floor:
                yield _Found(i, "output_spike", f"turn {obs.turn} of step {obs.step} answered {out} output tokens, "
                                                f"{out / median:.1f}x the median {median:g} of the "
                                                f"{len(before)} turns before it", (obs.turn,))
        if out:
            before.append(out)


def failed_turn(obs: Observation) -> bool:
    """Whether nothing the model tried in the turn worked: an unusable answer, or calls
    (other than step_complete/step_failed, and not denied) that all failed."""
    tried = [c for c in obs.calls if c.name not in CONTROL_TOOLS and c.outcome != "denied"]
    return obs.invalid is not None or (bool(tried) and all(c.outcome == "error" for c in tried))


def _error_streak(observations: Sequence[Observation], limit: AnomalyThresholds) -> Iterator[_Found]:
    run: list[int] = []
    for i, obs in enumerate(observations):
        run = [*run, i] if failed_turn(obs) else []
        if len(run) < limit.error_streak:
            continue
        what = ", ".join(dict.fromkeys(f"{c.name} {c.code}".strip() for n in run for c in observations[n].calls
                                       if c.outcome == "error") or ["answers that could not run"])
        yield _Found(i, "error_streak", f"nothing worked in {len(run)} turns in a row ({_where(observations, run)}): "
                                        f"{what}", _turns(observations, run))
        run = []


def verify_repeat(attempts: Sequence[tuple[int, Collection[str], bool]],
                  thresholds: AnomalyThresholds = AnomalyThresholds()) -> list[Anomaly]:
    """The verifications (attempt, failed criteria, whether the workspace changed since the
    one before) that failed the same criteria as earlier ones with changes in between: the
    changes did not touch what fails. The same failure with nothing changed is the
    coordinator's (ACODE-ORCH-008), not this."""
    chains: dict[frozenset[str], list[int]] = {}
    changed_since: dict[frozenset[str], bool] = {}
    found: list[tuple[Kind, str, tuple[int, ...], str]] = []
    for attempt, failed, changed in attempts:
        if changed:
            changed_since = dict.fromkeys(changed_since, True)
        key = frozenset(failed)
        if not key:
            continue
        chain = chains.setdefault(key, [])
        if not chain or changed_since.get(key, False):
            chain.append(attempt)
        changed_since[key] = False
        if len(chain) >= thresholds.verify_repeats:
            chains[key] = []
            found.append(("verify_repeat", f"the same criteria failed at verifications {', '.join(map(str, chain))} "
                                           f"although the workspace changed between them: "
                                           f"{excerpt(', '.join(sorted(key)))}",
                          tuple(chain), ""))
    return _scored(found)


def respond(history: Sequence[Response]) -> Response:
    """The next rung for an anomaly, given the responses already made to its kind in this
    step: a note, then a fresh window, then a pause."""
    if "fresh_window" in history or "pause" in history:
        return "pause"
    return "fresh_window" if "note" in history else "note"


ADVICE: dict[Kind, str] = {  # what a note tells the model to do about each kind
    "repeated_invalid": "Sending it again will not work: answer in the exact form the correction asks for.",
    "repeated_error": "The same thing fails the same way each time: fix what the error names, or take another way.",
    "edit_undone": "Your writes undo each other: decide which version is right, then make one change that keeps it.",
    "no_progress": "Doing the same things again shows nothing new: make the change the step asks for now.",
    "token_burn": "Act on what you have already read instead of reading it again.",
    "output_spike": "Keep answers short: what the step asks for, and at most a sentence around it.",
    "error_streak": "Check what exists and what is expected, then make one change you expect to succeed.",
    "verify_repeat": "Your changes did not touch what fails: read the checks' evidence and change what it points at.",
}
_GIVE_UP = frozenset({"repeated_invalid", "repeated_error", "no_progress", "error_streak"})


def note_text(anomaly: Anomaly, *, tools: bool = True, wrap: Callable[[str, str], str] | None = None) -> str:
    """The paragraph the model's next turn begins with: what was noticed, and what to do
    (``tools``: the tool loop, where step_failed may end the step; not the file style).
    ``wrap`` (a stage's :meth:`~actors.stages.prompting.untrusted.Fence.wrap`): the evidence quotes
    tool output and paths, so it goes to the model fenced, as tool results do."""
    give_up = " If the step cannot be done, call step_failed with the reason." if tools and \
        anomaly.kind in _GIVE_UP else ""
    if wrap is not None:
        return (f"Note from acode: it noticed this in your last turns:\n{wrap('anomaly evidence', anomaly.evidence)}"
                f"\n{ADVICE[anomaly.kind]}{give_up}")
    return f"Note from acode: {anomaly.evidence}. {ADVICE[anomaly.kind]}{give_up}"
