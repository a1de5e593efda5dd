"""The chat request: validation, token counts, the models' context windows."""
