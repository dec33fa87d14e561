"""A task, its plan and what the stages answer: the contracts the pipeline's work is written in.

The task's input contract (``task``), the TaskPlan the planner's model writes (``plan``),
the pipeline's vocabulary of stage names, cycle kinds and statuses (``stages``), what
stages, tools and models answer (``results``), and the scripted model file of the demo and
the tests (``script``). These modules build on :mod:`protocol.basics`,
:mod:`protocol.errors`, :mod:`protocol.calls` and :mod:`protocol.policy`.
"""
