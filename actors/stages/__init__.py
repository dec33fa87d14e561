"""The four stage actors (planner, executor, verifier, reviewer): stateless, one process each.

Its code is in rooms, imports running one way (actor → planning, execution, judging →
calls → request → prompting: a room may import any room beneath it; the three stages'
rooms import none of each other, and no room imports the actor)::

    actor.py      StageActor: serves its stage's service, one request at a time
    progress.py   the model calls in flight, published twice a second
    planning/     the planner: the context it gathers, a plan derived or read and checked
    execution/    the executor: the steps, their tool loop or whole-file answers, the anomalies
    judging/      the verifier and the reviewer: checks, verdicts, what runs again
    calls/        a tool call's way through a stage: the pipeline, previews, hooks, MCP tools
    request/      what one request works with: persistence, the model, the sandbox, the user
    prompting/    what a model is shown and answers, as text: fences, prompts, budgets

``python -m actors.stages --spec <json>`` runs it; the stage (``spec.actor``) picks the one
stage module the process imports (:func:`actors.stages.actor.runner`).
"""
