"""onnxruntime-only serving of exported models (never imports torch)."""

from attention_lab.serving.translator import OnnxTranslator, Translation

__all__ = ["OnnxTranslator", "Translation"]
