"""The executor stage: the plan's steps, each a few tries of a loop of turns with the model.

The stage (``executor``) runs the steps in dependency order; a step (``step``) is its tries,
each beginning from what its first message shows of the workspace (``stepview``) in a
window of the conversation that fits (``conversation``), then the tool loop (``toolloop``)
or, under the ``file`` step style, the step answered as one whole file (``filestep``, with
its prompts in ``fileprompt``, the answer read and refused in ``fileanswer``, the names a
step uses shown by ``definitions``). After each turn ``turnwatch`` asks ``anomalies``
whether the model went off the rails. These modules build on :mod:`actors.stages.calls`,
:mod:`actors.stages.request` and :mod:`actors.stages.prompting`, and import neither the
planner's room nor the verifier's.
"""
