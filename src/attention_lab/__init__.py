"""attention-lab: the attention timeline of NLP, reproduced and compared under one protocol."""

__version__ = "0.1.0"
