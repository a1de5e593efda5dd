"""Settings: every CHATQ_* variable, read once, with its default and unit."""
