"""The worker's side of per-key limits."""
