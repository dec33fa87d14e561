"""The four stage actors (planner, executor, verifier, reviewer): stateless, one process each."""
