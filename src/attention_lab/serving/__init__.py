"""onnxruntime-only serving of exported models (never imports torch): the HTTP app, its schemas, the
model registry and the explorer page. The onnxruntime helpers every task's serve.py shares are in
infer/runtime.py."""
