"""What each tool does: one module per family of tools, called by the core's dispatcher.

The file tools (``files``: read_file, write_file, modify_file, create_directory, with
modify_file's two forms in ``edits`` and ``patch``), the tree tools (``search``:
list_directory, search_code, search_code_terms), run_terminal (``terminal``), and the
internal baseline_workspace and diff_workspace (``baseline``, built on the workspace
room's snapshots). Each returns an :class:`~actors.sandbox.tools.output.Outcome`
(``output``: the result and its byte caps) or raises a
:class:`~protocol.errors.SandboxError`. Tools reach paths and commands only through
:mod:`actors.sandbox.confinement`, read workspace state through
:mod:`actors.sandbox.workspace`, and never import the core.
"""
