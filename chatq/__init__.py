"""chatq's core, shared by the web and the worker processes; imports neither."""
