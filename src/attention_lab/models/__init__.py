"""Translation families behind one contract (see base.Seq2Seq); conf/model/<family>.yaml names the class."""

from attention_lab.models.base import Seq2Seq, State
from attention_lab.models.lstm_seq2seq import LSTMEncoderDecoder, LuongNMT
from attention_lab.models.rnn_seq2seq import RNNEncoderDecoder, RNNSearch
from attention_lab.models.transformer import Transformer

__all__ = ["LSTMEncoderDecoder", "LuongNMT", "RNNEncoderDecoder", "RNNSearch", "Seq2Seq", "State", "Transformer"]
