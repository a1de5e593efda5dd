"""The jobs a worker process holds: their handles, the running set, their text flushed to the
store, and the store steps retried through an outage."""
