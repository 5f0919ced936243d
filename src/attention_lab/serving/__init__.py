"""onnxruntime-only serving of exported models (never imports torch): the HTTP app, the model registry and the
runtime helpers every task's serve.py shares."""
