"""The worker's side of per-key limits and of pacing."""
