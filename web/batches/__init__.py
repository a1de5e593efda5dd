"""OpenAI's Batches and Files endpoints, uploads streamed to storage."""
