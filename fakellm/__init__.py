"""fakellm: a small, fast, deterministic fake of OpenAI's chat-completions API."""
