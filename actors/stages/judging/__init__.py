"""The verifier and reviewer stages: whether the change does what the plan says, and whether to keep it.

The verifier (``verifier``) runs every criterion's check and the workspace's own
verification commands, asks the model only about what no command decides, and chooses
what of the finished work is kept and what the executor runs again (``rework``); the
reviewer (``reviewer``) judges the whole change and approves it, asks for changes or sends
it back to be planned again. These modules build on :mod:`actors.stages.calls`,
:mod:`actors.stages.request` and :mod:`actors.stages.prompting`, and import neither the
planner's room nor the executor's.
"""
