"""Translation families behind the decoder-step contract (core.decoder_step, through core.seq2seq.Seq2Seq); a module
per family name (seq2seq_*, bahdanau, luong_*, transformer)."""
