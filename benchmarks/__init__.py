"""Speed benchmarks that write their figures to reports/ (not timed tests)."""
