"""Digit-canvas captioning: the canvas generator, Show-Tell and Show-Attend-Tell, training,
evaluation, ONNX export and serving. Declared once in task.py."""
