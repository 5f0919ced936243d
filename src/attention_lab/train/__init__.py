"""Training: the LightningModule base, one run, trials and studies, search spaces, batching,
checkpoints."""
