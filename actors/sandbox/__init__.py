"""The tool sandbox: the only acode process that touches a workspace."""
