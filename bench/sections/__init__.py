"""The benchmark sections, one module each; SECTIONS maps a name to its runner."""
