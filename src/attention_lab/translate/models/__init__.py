"""Translation families behind the decoder-step contract (core.seq2seq); a module per family name (seq2seq_*,
bahdanau, luong_*, transformer)."""
