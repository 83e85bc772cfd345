"""Helpers for tests and benchmarks only (synthetic captures with known answers). Nothing in the
product imports this package; import-linter keeps it that way."""
