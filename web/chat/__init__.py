"""The OpenAI-compatible chat front door: completions, chunks, stored answers."""
