"""OpenAI's Responses API (text subset) as chatq jobs."""
