"""chatq's benchmark harness: `python -m bench [--quick] [--only NAME,...]`; see bench/README.md."""
