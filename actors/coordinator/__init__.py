"""The coordinator: supervisor of the actor processes and orchestrator of sessions."""
