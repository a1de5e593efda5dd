"""The batch loop: validate, feed, settle and finalize each batch."""
