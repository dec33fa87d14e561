"""What the executor's model may call, what each call risks and what it needs before it runs.

The built-in tools' argument Structs, risk classes and definitions (``tools``); MCP tools in
acode's terms (``mcp``); a command line read as its program reads it (``cmdline``, with the
programs' option tables in ``cmdtables``) and the risk class and shape of a command
(``commands``); and the autonomy levels and approvals a call is checked against
(``autonomy``). These modules build on :mod:`protocol.basics` and :mod:`protocol.errors`
only.
"""
