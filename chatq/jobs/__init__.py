"""A job's life: its record, the store's steps, results, events, rates, cache."""
