"""How a command or a file access is confined: the sandbox's walls, which know no tool.

A path the model names is resolved beneath the workspace root by the kernel (``confine``)
and refused in ``.git``, ``.agent`` or acode's home (``protected``); a command passes the
policy (``policy``: argv and allowlist, then ``argrules``, per program), runs at the
strongest isolation the machine offers (``isolation``: bubblewrap, Landlock or process
level) through the exec helper (``launcher``, stdlib only, run as a script), sees only its
read boundary (``visible``, with the workspace's own interpreter from ``toolchain``), and
cannot change git's configuration, hooks or index links (``sealed``, ``gitindex``) without
the compare-and-restore around it noticing (``tripwire``); ``hardlinks`` lists hard links
leading out of a workspace for ``acode doctor``. Nothing here imports another room of the
sandbox: the tools, the workspace state and the core build on these modules.
"""
