"""``python -m protocol.schema``: rewrite the committed schema of the current version from the types."""

from __future__ import annotations

from protocol.schema import SCHEMA_VERSION, generate, path

if __name__ == "__main__":
    path().write_text(generate(), encoding="utf-8")
    print(f"wrote {path()} (schema version {SCHEMA_VERSION})")
