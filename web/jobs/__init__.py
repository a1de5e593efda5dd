"""The job endpoints: submit, status, result, cancel, events, long-polling."""
