"""The ``mcp`` actor: tools from the user's MCP servers, the only acode process that imports
the MCP SDK (``pip install acode[mcp]``; the coordinator supervises it only when installed).

Its code reads one way (actor → runtime → hub → server → confined, listing; pins and begun
are plain files)::

    actor.py     McpActor: serves "mcp" (list, call, pin) on a thread pool
    runtime.py   the asyncio thread that owns every SDK session
    hub.py       the server instances, keyed as the protocol says; list and call
    server.py    one server: its session, death, restarts with backoff, calls (imports mcp)
    confined.py  how a stdio server starts: the sandbox's launcher, isolation, fresh HOME
    listing.py   SDK tools and results in acode's terms (names, risk, hash, text)
    pins.py      the approved definitions ($ACODE_HOME/mcp-pins.json)
    begun.py     the calls begun, so none runs twice ($ACODE_HOME/run/mcp-calls)

``python -m actors.mcp --spec <json>`` runs it.
"""
