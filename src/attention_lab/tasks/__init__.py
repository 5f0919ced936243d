"""LightningModules, one per task."""
