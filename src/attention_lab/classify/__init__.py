"""Document classification with rationales: generated reviews and readers, the classifier families
(BERT and its pretraining included), training, evaluation, ONNX export and serving. Declared once in
task.py."""
