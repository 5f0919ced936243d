"""onnxruntime-only serving of exported models (never imports torch)."""

from attention_lab.translate.serve import OnnxTranslator, Translation

__all__ = ["OnnxTranslator", "Translation"]
