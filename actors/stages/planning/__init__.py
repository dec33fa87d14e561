"""The planner stage: the task and what the workspace shows of it become a checked plan.

The stage (``planner``) gathers what its model sees within the planner's budget
(``gather``: the workspace tree read and cut by ``listing``, key files, files matching the
task's terms), or derives a plan from the task without asking when the task says
everything (``derive``); the model's plan is read and checked before anything acts on it
(``plancheck``), and one that would change only tests the task named as checks is
retargeted (``testtarget``). These modules build on :mod:`actors.stages.calls`,
:mod:`actors.stages.request` and :mod:`actors.stages.prompting`, and import neither the
executor's room nor the verifier's: a planner process loads only its own stage's code.
"""
