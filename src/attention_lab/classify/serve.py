"""onnxruntime-only document classification: model.onnx, the family's tokenizer (word-level, or
WordPiece for the BERT families, whose piece weights are summed per word) and the sentence/word
splitter.

Never imports torch: serving needs numpy, onnxruntime, tokenizers (and
attention_lab.classify.data.labeled for splitting).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention_lab.classify.data.segment import split_sentences, split_words
from attention_lab.infer.runtime import TOKENIZER_FILE, make_session, read_meta, read_tokenizer
from attention_lab.infer.tokenization import encode_document, pool_pieces, truncate

MODEL_FILE = "model.onnx"


def document_arrays(
    ids: list[list[list[int]]], hierarchical: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Documents of sentences of word ids -> (ids, mask): (B, N, L) if hierarchical else (B, T),
    padded with 0."""
    if hierarchical:
        N = max(len(doc) for doc in ids)
        L = max(len(s) for doc in ids for s in doc)
        out = np.zeros((len(ids), N, L), dtype=np.int64)
        for b, doc in enumerate(ids):
            for n, s in enumerate(doc):
                out[b, n, : len(s)] = s
    else:
        flat = [[i for s in doc for i in s] for doc in ids]
        out = np.zeros((len(ids), max(len(f) for f in flat)), dtype=np.int64)
        for b, f in enumerate(flat):
            out[b, : len(f)] = f
    return out, out != 0


@dataclass
class Classification:
    """One document's label, class probabilities and attention (sentence weights, word weights per
    sentence)."""

    label: str
    probabilities: dict[str, float]
    sentences: list[list[str]]
    sentence_weights: list[float] | None
    word_weights: list[list[float]] | None

    def top_sentences(self, k: int = 3) -> list[tuple[float, str]]:
        """The k most attended sentences as (weight, text), most attended first."""
        if self.sentence_weights is None:
            return []
        order = np.argsort(self.sentence_weights)[::-1][:k]
        return [(self.sentence_weights[i], " ".join(self.sentences[i])) for i in order]

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "probabilities": self.probabilities,
            "sentences": self.sentences,
            "sentence_weights": self.sentence_weights,
            "word_weights": self.word_weights,
        }


class OnnxClassifier:
    """An exported classify family (models/<family>/onnx): text in, label and attention out."""

    def __init__(self, model_dir: str | Path, threads: int = 1):
        model_dir = Path(model_dir)
        self.meta = read_meta(
            model_dir, "classify", ("labels", "hierarchical", "max_sentences", "max_words")
        )
        self.session = make_session(model_dir / MODEL_FILE, threads)
        self.tok = read_tokenizer(model_dir / TOKENIZER_FILE)
        self.labels: list[str] = self.meta["labels"]

    def split(self, text: str) -> list[list[str]]:
        """Sentences of words, truncated as in training (max_sentences, max_words)."""
        sentences = [split_words(s) for s in split_sentences(text)]
        sentences = [s[: self.meta["max_words"]] for s in sentences if s][
            : self.meta["max_sentences"]
        ]
        if not sentences:
            raise ValueError("empty document: no words to classify")
        return sentences

    def encode(self, document: list[list[str]]) -> tuple[list[list[int]], list[list[int]]]:
        """Token ids per sentence and the word index of each token, cut to the model's
        max_tokens."""
        return truncate(*encode_document(self.tok, document), self.meta.get("max_tokens"))

    def run(self, encoded: list[list[list[int]]]) -> dict[str, np.ndarray]:
        """Token ids of documents -> the graph's named outputs (logits, and word/sentence/hops
        weights where the family has them)."""
        ids, mask = document_arrays(encoded, self.meta["hierarchical"])
        outs = self.session.run(None, {"ids": ids, "mask": mask})
        return dict(zip([o.name for o in self.session.get_outputs()], outs))

    def classify(self, texts: list[str]) -> list[Classification]:
        documents = [self.split(t) for t in texts]
        encoded = [self.encode(doc) for doc in documents]
        out = self.run([ids for ids, _ in encoded])
        logits = out["logits"] - out["logits"].max(-1, keepdims=True)
        probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        results = []
        for b, (doc, (ids, word_of)) in enumerate(zip(documents, encoded)):
            doc = [s[: max(w) + 1] for s, w in zip(doc, word_of)]  # the words the model saw
            lengths = [len(w) for w in word_of]
            sentence_w, word_w = None, None
            if "word" in out:
                w = out["word"][b]
                if w.ndim == 2:  # (N, L)
                    tokens = [w[n, :k] for n, k in enumerate(lengths)]
                else:  # (T,)
                    edges = np.cumsum([0, *lengths])
                    tokens = [w[edges[n] : edges[n + 1]] for n in range(len(lengths))]
                word_w = [pool_pieces(t, wo).tolist() for t, wo in zip(tokens, word_of)]
                sentence_w = (
                    out["sentence"][b, : len(lengths)].tolist()
                    if "sentence" in out
                    else [float(sum(ws)) for ws in word_w]
                )
            results.append(
                Classification(
                    self.labels[int(probs[b].argmax())],
                    dict(zip(self.labels, probs[b].tolist())),
                    doc,
                    sentence_w,
                    word_w,
                )
            )
        return results
