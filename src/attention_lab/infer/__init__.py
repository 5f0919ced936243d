"""Inference without torch: greedy and beam search in NumPy, onnxruntime sessions, tokenization."""
