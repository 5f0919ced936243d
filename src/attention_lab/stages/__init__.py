"""The DVC stages' entry points: `python -m attention_lab.stages.<stage> task=<task>
[family=<name>]` (dvc.yaml)."""
