"""Wire types, codec, error codes and the plan/result contracts (no I/O here)."""
