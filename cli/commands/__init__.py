"""The ``acode`` commands, one module per kind of work: :mod:`~cli.commands.lifecycle`
starts, stops and shows the actor set (``up``, ``down``, ``status``);
:mod:`~cli.commands.sessions` submits and follows sessions (``run``, ``attach``,
``sessions``, ``show``, ``cancel``, ``resume``); :mod:`~cli.commands.steering` is a human's
hand on a session (``pause``, ``steer``, ``approve``, ``deny``, ``replan``, ``answer``,
``plan show``); :mod:`~cli.commands.maintenance` looks after the setup (``doctor``,
``trust``, ``logs``, ``demo``); :mod:`~cli.commands.mcp` is the ``acode mcp`` group
(``mcp serve``: :mod:`~cli.commands.mcp_serve`, acode as an MCP server for another agent).
:mod:`~cli.commands.home` holds what they share: the
``--home`` option and its paths, ``--json``. The commands are plain functions; ``cli.app``
registers them on its one typer app, in the order ``acode --help`` lists them.
"""
