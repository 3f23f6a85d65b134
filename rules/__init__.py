"""Built-in bottleneck rules, one module per code; see README.md for the catalogue."""
