"""English→Korean translation: the generated corpus and readers, the Seq2Seq families, training,
evaluation, ONNX export and serving. Declared once in task.py."""
