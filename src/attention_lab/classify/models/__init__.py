"""Classifier families behind DocumentClassifier; a module per family name (bow, bigru_max, han,
self_attentive, transformer_encoder, bert and bert_minilm)."""
