"""Batches and their files: records, lines, storage and quota."""
