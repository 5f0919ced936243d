"""Translation families behind the decoder-step contract (nn.decoder_step, through
translate.seq2seq.Seq2Seq); a module per family name (seq2seq_*, bahdanau, luong_*, transformer)."""
