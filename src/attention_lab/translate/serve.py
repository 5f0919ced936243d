"""onnxruntime-only translation: encoder + decoder-step graphs, the HF tokenizer and decoding.py's
search.

Never imports torch (directly or through attention_lab modules that do): serving needs numpy,
onnxruntime, tokenizers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from attention_lab.infer.decoding import Arrays, Hypothesis, max_decode_len, pad_batch, search
from attention_lab.infer.runtime import ExportedDecoder
from attention_lab.infer.tokenization import tokens_of

# what translation reads from meta.json
META_KEYS = (
    "has_attention",
    "pad_id",
    "bos_id",
    "eos_id",
    "encoder_state_outputs",
    "state_inputs",
    "state_outputs",
    "max_len_ratio",
)


def ort_encode(
    encoder: ort.InferenceSession, meta: dict, src: np.ndarray, src_mask: np.ndarray
) -> tuple[Arrays, Arrays]:
    """Run the encoder graph: src (B, S) int64, src_mask (B, S) bool -> (initial state, (memory,
    src_mask))."""
    outs = encoder.run(None, {"src": src.astype(np.int64), "src_mask": src_mask.astype(bool)})
    named = dict(zip([o.name for o in encoder.get_outputs()], outs))
    return tuple(named[n] for n in meta["encoder_state_outputs"]), (
        named["memory"],
        src_mask.astype(bool),
    )


@dataclass
class Translation:
    """One translated sentence and its attention over source words (rows) x target tokens
    (columns)."""

    source: str
    text: str
    tokens: list[str]  # target subword tokens (no bos/eos)
    token_ids: list[int]
    source_words: list[str]
    # (len(source_words), len(tokens)); a column sums to 1 when the model attends
    attention: np.ndarray
    score: float
    has_attention: bool = True

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "translation": self.text,
            "tokens": self.tokens,
            "token_ids": self.token_ids,
            "source_words": self.source_words,
            "attention": np.round(self.attention, 4).tolist(),
            "score": self.score,
            "has_attention": self.has_attention,
        }


def source_words(
    sentence: str, word_ids: list[int | None], offsets: list[tuple[int, int]]
) -> list[str]:
    """The text of each source word (Encoding.word_ids order), cut from the sentence by its tokens'
    offsets."""
    spans: dict[int, list[int]] = {}
    for w, (start, end) in zip(word_ids, offsets):
        if w is not None:
            span = spans.setdefault(w, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
    return [sentence[a:b].strip() for a, b in (spans[w] for w in sorted(spans))]


def to_word_rows(attn: np.ndarray, word_ids: list[int | None]) -> np.ndarray:
    """Subword attention (T, S) -> (words, T): sum the source-token columns of each word (word index
    = row)."""
    words = sorted({w for w in word_ids if w is not None})
    rows = np.zeros((len(words), attn.shape[0]), dtype=np.float32)
    index = {w: i for i, w in enumerate(words)}
    for s, w in enumerate(word_ids[: attn.shape[1]]):
        if w is not None:
            rows[index[w]] += attn[:, s]
    return rows


class OnnxTranslator(ExportedDecoder):
    """Translate sentences with an exported model folder (encoder.onnx, decoder_step.onnx,
    meta.json, tokenizer.json)."""

    task, meta_keys = "translate", META_KEYS

    @property
    def has_attention(self) -> bool:
        return bool(self.meta["has_attention"])

    def translate_ids(
        self,
        src_ids: list[list[int]],
        beam: int = 4,
        len_penalty: float = 1.0,
        max_len_ratio: float | None = None,
    ) -> list[Hypothesis]:
        """Search over non-empty source id lists; attention trimmed to each source length (T,
        S_b)."""
        src, src_mask = pad_batch(src_ids, self.meta["pad_id"])
        state, memory = ort_encode(self.encoder, self.meta, src, src_mask)
        ratio = self.meta["max_len_ratio"] if max_len_ratio is None else max_len_ratio
        hyps = search(
            self.step,
            state,
            memory,
            max_decode_len(src_mask, ratio),
            beam,
            len_penalty,
            self.meta["bos_id"],
            self.meta["eos_id"],
            self.banned,
        )
        for hyp, ids in zip(hyps, src_ids):
            hyp.attention = hyp.attention[:, : len(ids)]
        return hyps

    def translate(
        self,
        sentences: list[str],
        beam: int = 4,
        len_penalty: float = 1.0,
        max_len_ratio: float | None = None,
    ) -> list[Translation]:
        """Translate a batch of sentences (whitespace collapsed; source ids carry no special tokens,
        as in training)."""
        sentences = [" ".join(s.split()) for s in sentences]
        encodings = self.tokenizer.encode_batch(sentences, add_special_tokens=False)
        todo = [i for i, e in enumerate(encodings) if e.ids]
        hyps = dict(
            zip(
                todo,
                self.translate_ids(
                    [encodings[i].ids for i in todo], beam, len_penalty, max_len_ratio
                )
                if todo
                else [],
            )
        )
        out = []
        for i, (sentence, enc) in enumerate(zip(sentences, encodings)):
            words = source_words(sentence, enc.word_ids, enc.offsets)
            hyp = hyps.get(i) or Hypothesis([], 0.0, np.zeros((0, 0), dtype=np.float32))
            attn = (
                to_word_rows(hyp.attention, enc.word_ids)
                if enc.ids
                else np.zeros((0, 0), dtype=np.float32)
            )
            out.append(
                Translation(
                    source=sentence,
                    text=self.tokenizer.decode(hyp.tokens, skip_special_tokens=True),
                    tokens=tokens_of(self.tokenizer, hyp.tokens),
                    token_ids=list(hyp.tokens),
                    source_words=words,
                    attention=attn,
                    score=float(hyp.score),
                    has_attention=self.has_attention,
                )
            )
        return out
