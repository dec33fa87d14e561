"""The broker process and the client and worker helpers every actor uses (ZeroMQ lives here)."""
