"""The machinery around the models: the generated dvc.yaml and its code deps, the scheduler,
provenance, proofs."""
