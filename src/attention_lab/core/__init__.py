"""What every task uses: attention, layers, decoding, batching, tokenization, checkpoints, config,
tracking, plots, significance, reports and the task registry."""
