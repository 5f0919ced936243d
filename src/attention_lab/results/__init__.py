"""Results: metrics, significance, plots and charts, the report pages, ablations, the protocol."""
