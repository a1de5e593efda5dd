"""Who may run what, when: per-key limits and budgets, fair dispatch, pacing."""
