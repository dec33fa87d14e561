"""acode as a library."""
