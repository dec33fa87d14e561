"""A tool call's way through a stage: the pipeline every call passes, and what it needs.

Every tool call a model asks for, and every check command the verifier runs, passes the
pipeline in seed 002's order (``pipeline``): its budget steps, the autonomy step with the
diff or command an approval prompt shows (``preview``), the user's ``pre_tool`` and
``post_tool`` hooks (``stagehooks``, which also run ``step_start``/``step_end``), and the
session's MCP tools, offered and told apart (``mcptools``). A check's result is judged
against what the plan expects (``judge``), for the verifier and the executor's file step
alike. These modules build on :mod:`actors.stages.request` and
:mod:`actors.stages.prompting` only.
"""
