"""Joey NMT 2.3 for benchmarks/peers.py: its virtualenv, our tokenized data as its plain files, its configs at our
sizes, and its driver (benchmarks/joey_driver.py) run in that venv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.common import ROOT

VENV = ROOT / ".venv-peers"
JOEY = "joeynmt==2.3.0"
TORCH = "torch==2.13.0"  # first and pinned: joeynmt asks torch>=1.12, which pip would meet with a CUDA build
EXTRA = ("importlib_metadata",)  # joeynmt.helpers imports it; joeynmt 2.3.0 does not declare it
LANGS = ("en", "ko")
RNN_STEP, RNN_TOLERANCE = 32, 0.10  # Joey's RNN decoder: a multiple of 32 whose model is within 10% of ours


def ensure_venv(venv: Path = VENV) -> Path:
    """venv's python, after creating venv with torch (pinned, first), joeynmt and what it forgets, when missing."""
    python = venv / "bin" / "python"
    if python.is_file() and subprocess.run([str(python), "-c", "import joeynmt.training"],
                                           check=False, capture_output=True).returncode == 0:
        return python
    print(f"creating {venv}: {TORCH}, then {JOEY} (a few minutes)", file=sys.stderr)
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(python), "-m", "pip", "install", "-q", TORCH],
             [str(python), "-m", "pip", "install", "-q", JOEY, *EXTRA]]
    for cmd in steps:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()[-2000:]}")
    return python


def tokens(tok, ids: list[int]) -> str:
    """Our token ids as Joey's word-level line: the BPE pieces, one space between (a piece holds no whitespace)."""
    pieces = [tok.id_to_token(i) for i in ids]
    if bad := [p for p in pieces if not p or p.split() != [p] or p.splitlines() != [p]]:
        raise ValueError(f"pieces {bad!r} would not survive Joey's split on spaces and lines")
    return " ".join(pieces)


def write_split(rows: list[dict], prefix: Path, tok, reverse_source: bool = False) -> None:
    """prefix.en and prefix.ko: one pair a line, our BPE pieces of src and tgt, in the order of rows; each source
    backwards with reverse_source (what our Luong encoder reads: Sutskever et al. 2014, §3.3)."""
    for lang, key in zip(LANGS, ("src_ids", "tgt_ids")):
        flip = reverse_source and key == "src_ids"
        lines = (tokens(tok, r[key][::-1] if flip else r[key]) + "\n" for r in rows)
        Path(f"{prefix}.{lang}").write_text("".join(lines), encoding="utf-8")


def write_vocab(tok, path: Path) -> None:
    """Our vocabulary in id order, one piece a line (Joey puts its four specials, the same strings, first)."""
    path.write_text("".join(tok.id_to_token(i) + "\n" for i in range(tok.get_vocab_size())), encoding="utf-8")


def train_order(dm, updates: int) -> list[list[dict]]:
    """The training batches our Trainer draws in its first `updates` updates: the DataModule's batch sampler, epoch
    by epoch (set_epoch, as TaskModule.on_train_epoch_start does)."""
    sampler, batches, epoch = dm.train_dataloader().batch_sampler, [], 0
    while len(batches) < updates:
        sampler.set_epoch(epoch)
        batches += [[dm.splits["train"][i] for i in b] for b in sampler]
        epoch += 1
    return batches[:updates]


def export(dm, updates: int, out: Path, reverse_source: bool = False) -> dict:
    """Joey's data under out: train (our first `updates` batches, flattened in order), dev (our valid split) and the
    vocabulary, sources backwards with reverse_source. Whether Joey's batches of batch_size consecutive lines are
    ours (every batch full)."""
    out.mkdir(parents=True, exist_ok=True)
    batches = train_order(dm, updates)
    write_split([r for b in batches for r in b], out / "train", dm.tok, reverse_source)
    write_split(dm.splits["valid"], out / "dev", dm.tok, reverse_source)
    write_vocab(dm.tok, out / "vocab.txt")
    return {"pairs": sum(map(len, batches)), "same_batches": all(len(b) == dm.batch_size for b in batches)}


def rnn_params(vocab: int, emb: int, enc: int, dec: int) -> int:
    """Parameters of Joey's GRU encoder-decoder with Bahdanau attention, bidirectional encoder, input feeding,
    bridge, separate source and target embeddings: emb, encoder (per direction) and decoder sizes."""
    def gru(i: int, h: int) -> int:
        return 3 * (i * h + h * h + 2 * h)

    return (2 * vocab * emb + 2 * gru(emb, enc) + gru(emb + dec, dec) + (dec + 2 * enc) * dec + dec
            + dec * vocab + 2 * enc * dec + dec * dec + dec + 2 * enc * dec + dec)


def rnn_hidden(vocab: int, emb: int, enc: int, dec: int, ours: int, tolerance: float = RNN_TOLERANCE,
               step: int = RNN_STEP) -> int:
    """Joey's decoder size: ours, or the largest multiple of step below it whose model is within tolerance of ours
    (Joey's output path, an attentional layer of the decoder's size then the vocabulary, is larger than our maxout)."""
    for h in range(dec, step - 1, -step):
        if rnn_params(vocab, emb, enc, h) <= (1 + tolerance) * ours:
            return h
    return step


def embed_init(std: float) -> dict:
    """Joey's embeddings drawn as ours, N(0, std²): under its default (Xavier-uniform, far smaller for a table of
    2,000 × 128) its Transformer learnt much more slowly than ours on the same batches."""
    return {"embed_initializer": "normal", "embed_init_weight": std}


def recurrent_config(emb: int, dropout: float, rnn_type: str, encoder: int, bidirectional: bool, decoder: int,
                     layers: int, init_hidden: str) -> dict:
    """Joey's recurrent encoder-decoder with its "bahdanau" (MLP) attention and input feeding, dropout everywhere it
    has one; embeddings N(0, 1) as torch.nn.Embedding's (ours)."""
    def embeddings() -> dict:  # a dict per side: one shared object would reach Joey's YAML as an anchor and alias
        return {"embedding_dim": emb, "dropout": dropout}

    return {**embed_init(1.0),
            "encoder": {"type": "recurrent", "rnn_type": rnn_type, "bidirectional": bidirectional,
                        "num_layers": layers, "hidden_size": encoder, "dropout": dropout, "embeddings": embeddings()},
            "decoder": {"type": "recurrent", "rnn_type": rnn_type, "num_layers": layers, "hidden_size": decoder,
                        "attention": "bahdanau", "input_feeding": True, "init_hidden": init_hidden, "dropout": dropout,
                        "hidden_dropout": dropout, "embeddings": embeddings()}}


def rnn_config(dims: dict, hidden: int) -> dict:
    """Joey's RNN + Bahdanau attention at our bahdanau sizes (conf/model/bahdanau.yaml): bidirectional GRU encoder,
    a bridge to a GRU decoder of size `hidden`."""
    return recurrent_config(dims["emb_dim"], dims["dropout"], "gru", dims["enc_hidden_dim"], True, hidden, 1, "bridge")


def luong_config(dims: dict) -> dict:
    """Joey's RNN as Luong et al. 2015's global model at our luong_concat sizes (conf/model/luong_concat.yaml, tuned/):
    one-way LSTM encoder and decoder of our hidden size and layers, the decoder started from the encoder's last state,
    and Joey's "bahdanau" score vᵀ tanh(W h_t + U h̄_s), which is Luong's concat (eq. 8) queried with the new state."""
    hidden = dims["hidden_dim"]
    return recurrent_config(dims["emb_dim"], dims["dropout"], "lstm", hidden, False, hidden, dims["layers"], "last")


def transformer_config(dims: dict) -> dict:
    """Joey's Transformer at our transformer sizes: pre-LN, one embedding for source, target and softmax, scaled."""
    side = {"type": "transformer", "num_layers": None, "num_heads": dims["heads"], "hidden_size": dims["d_model"],
            "ff_size": dims["d_ff"], "dropout": dims["dropout"], "layer_norm": "pre",
            "embeddings": {"embedding_dim": dims["d_model"], "scale": True, "dropout": dims["dropout"]}}
    return {"tied_embeddings": True, "tied_softmax": True, **embed_init(dims["d_model"] ** -0.5),  # our N(0, 1/d)
            "encoder": {**side, "num_layers": dims["enc_layers"]},
            "decoder": {**side, "num_layers": dims["dec_layers"]}}


def config(model: dict, data: Path, work: Path, train: dict, sizes: dict, seed: int) -> dict:
    """A whole Joey config: plain word-level files of our pieces, our vocabulary, Adam at our rate and clipping,
    sizes["updates"] batches of our size in file order, no validation while training (validation_freq past the last
    update, a multiple of logging_freq as Joey asks); greedy search for its own validation, sizes["decode_batch"]."""
    updates = sizes["updates"]
    side = {"level": "word", "lowercase": False, "normalize": False, "max_length": -1, "min_length": -1,
            "voc_file": str(data / "vocab.txt")}
    return {"name": work.name, "joeynmt_version": "2.3.0", "use_cuda": False,
            "data": {"train": str(data / "train"), "dev": str(data / "dev"), "dataset_type": "plain",
                     "src": {**side, "lang": LANGS[0]}, "trg": {**side, "lang": LANGS[1]}},
            "testing": {"beam_size": 1, "batch_size": sizes["decode_batch"], "batch_type": "sentence",
                        "max_output_length": -1, "eval_metrics": ["bleu"]},
            "training": {"model_dir": str(work), "overwrite": True, "random_seed": seed, "optimizer": "adam",
                         "adam_betas": [0.9, 0.999], "learning_rate": train["lr"],
                         "weight_decay": train["weight_decay"], "clip_grad_norm": train["clip"],
                         "label_smoothing": train["label_smoothing"], "loss": "crossentropy",
                         "scheduling": "warmupinversesquareroot",  # the driver replaces it (WarmupConstant says why)
                         "batch_size": train["batch_size"], "batch_type": "sentence", "normalization": "tokens",
                         "shuffle": False, "epochs": 1, "max_updates": updates, "validation_freq": 2 * updates,
                         "logging_freq": updates, "early_stopping_metric": "loss",
                         "keep_best_ckpts": 1, "num_workers": 0, "print_valid_sents": []},
            "model": {"initializer": "xavier_uniform", "bias_initializer": "zeros", **model}}


def run(python: Path, cfg: dict, work: Path, warmup: int, max_len_ratio: float, sizes: dict) -> dict:
    """benchmarks/joey_driver.py on cfg in Joey's venv, one thread (OMP_NUM_THREADS=1); its JSON figures."""
    import yaml

    work.mkdir(parents=True, exist_ok=True)
    path, out = work.with_suffix(".yaml"), work.with_suffix(".json")
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    cmd = [str(python), str(ROOT / "benchmarks" / "joey_driver.py"), str(path), str(out),
           "--warmup-steps", str(warmup), "--max-len-ratio", str(max_len_ratio), "--decode-batch",
           str(sizes["decode_batch"])]
    done = subprocess.run(cmd, check=False, env={**env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=sizes["timeout"])
    if done.returncode:
        raise RuntimeError(f"Joey NMT's driver failed ({' '.join(cmd)}):\n{done.stderr.strip()[-3000:]}")
    return json.loads(out.read_text(encoding="utf-8"))
