"""Our translate families beside Joey NMT 2.3's: training tokens/s, validation loss after the same
updates and greedy decoding speed, on the same data, vocabulary and batches -> the section `peers`
of reports/benchmarks.md and .json.

    python benchmarks/peers.py                 # 1,000 updates a model, seeds 0 and 1, about 30
    minutes python benchmarks/peers.py --quick         # 20 updates, one seed: checks the run,
    prints the section python benchmarks/peers.py --updates 500 --work /tmp/peers    # keep Joey's
    files, configs and logs python benchmarks/peers.py --rerender      # the section again from
    reports/benchmarks.json's figures

Joey NMT runs in its own virtualenv, .venv-peers (created when missing: TORCH first, then JOEY and
EXTRA), through benchmarks/joey_driver.py; our data comes from the prepare and tokenize stages (run
here when data/ lacks them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lightning.pytorch as pl
import torch

# `python benchmarks/peers.py` finds the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attention_lab.core.machine import cpu_model
from attention_lab.infer.tokenization import PAD
from benchmarks.common import ROOT, command, num, prepared, table, write_marked_section

SECTION = (
    "peers"  # its key in benchmarks.json and its markers in benchmarks.md (speed.py keeps both)
)
# our family -> Joey's model: its RNN as Bahdanau's nearest (GRU, bridge; sized to ours), its RNN as
# Luong's global model (the same architecture as ours: luong_config), its Transformer
PAIRS = {"bahdanau": "rnn", "luong_concat": "rnn_luong", "transformer": "transformer"}
QUALITY = 0.02  # "equal quality": ours' validation loss at most 2% above Joey's
REPORT = ROOT / "reports" / "benchmarks.md"
VENV = ROOT / ".venv-peers"
JOEY = "joeynmt==2.3.0"
# first and pinned: joeynmt asks torch>=1.12, which pip would meet with a CUDA build
TORCH = "torch==2.13.0"
EXTRA = ("importlib_metadata",)  # joeynmt.helpers imports it; joeynmt 2.3.0 does not declare it
LANGS = ("en", "ko")
# Joey's RNN decoder: a multiple of 32 whose model is within 10% of ours
RNN_STEP, RNN_TOLERANCE = 32, 0.10


# Joey NMT's side: its virtualenv, our data as its plain files, its configs at our sizes, its driver


def ensure_venv(venv: Path = VENV) -> Path:
    """venv's python, after creating venv with torch (pinned, first), joeynmt and what it forgets,
    when missing."""
    python = venv / "bin" / "python"
    if (
        python.is_file()
        and subprocess.run(
            [str(python), "-c", "import joeynmt.training"], check=False, capture_output=True
        ).returncode
        == 0
    ):
        return python
    print(f"creating {venv}: {TORCH}, then {JOEY} (a few minutes)", file=sys.stderr)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", TORCH],
        [str(python), "-m", "pip", "install", "-q", JOEY, *EXTRA],
    ]
    for cmd in steps:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()[-2000:]}")
    return python


def tokens(tok, ids: list[int]) -> str:
    """Our token ids as Joey's word-level line: the BPE pieces, one space between (a piece holds no
    whitespace)."""
    pieces = [tok.id_to_token(i) for i in ids]
    if bad := [p for p in pieces if not p or p.split() != [p] or p.splitlines() != [p]]:
        raise ValueError(f"pieces {bad!r} would not survive Joey's split on spaces and lines")
    return " ".join(pieces)


def write_split(rows: list[dict], prefix: Path, tok, reverse_source: bool = False) -> None:
    """prefix.en and prefix.ko: one pair a line, our BPE pieces of src and tgt, in the order of
    rows; each source backwards with reverse_source (what our Luong encoder reads: Sutskever et al.
    2014, §3.3)."""
    for lang, key in zip(LANGS, ("src_ids", "tgt_ids")):
        flip = reverse_source and key == "src_ids"
        lines = (tokens(tok, r[key][::-1] if flip else r[key]) + "\n" for r in rows)
        Path(f"{prefix}.{lang}").write_text("".join(lines), encoding="utf-8")


def write_vocab(tok, path: Path) -> None:
    """Our vocabulary in id order, one piece a line (Joey puts its four specials, the same strings,
    first)."""
    path.write_text(
        "".join(tok.id_to_token(i) + "\n" for i in range(tok.get_vocab_size())), encoding="utf-8"
    )


def train_order(dm, updates: int) -> list[list[dict]]:
    """The training batches our Trainer draws in its first `updates` updates: the DataModule's batch
    sampler, epoch by epoch (set_epoch, as TaskModule.on_train_epoch_start does)."""
    sampler, batches, epoch = dm.train_dataloader().batch_sampler, [], 0
    while len(batches) < updates:
        sampler.set_epoch(epoch)
        batches += [[dm.splits["train"][i] for i in b] for b in sampler]
        epoch += 1
    return batches[:updates]


def export(dm, updates: int, out: Path, reverse_source: bool = False) -> dict:
    """Joey's data under out: train (our first `updates` batches, flattened in order), dev (our
    valid split) and the vocabulary, sources backwards with reverse_source. Whether Joey's batches
    of batch_size consecutive lines are ours (every batch full)."""
    out.mkdir(parents=True, exist_ok=True)
    batches = train_order(dm, updates)
    write_split([r for b in batches for r in b], out / "train", dm.tok, reverse_source)
    write_split(dm.splits["valid"], out / "dev", dm.tok, reverse_source)
    write_vocab(dm.tok, out / "vocab.txt")
    return {
        "pairs": sum(map(len, batches)),
        "same_batches": all(len(b) == dm.batch_size for b in batches),
    }


def rnn_params(vocab: int, emb: int, enc: int, dec: int) -> int:
    """Parameters of Joey's GRU encoder-decoder with Bahdanau attention, bidirectional encoder,
    input feeding, bridge, separate source and target embeddings: emb, encoder (per direction) and
    decoder sizes."""

    def gru(i: int, h: int) -> int:
        return 3 * (i * h + h * h + 2 * h)

    return (
        2 * vocab * emb
        + 2 * gru(emb, enc)
        + gru(emb + dec, dec)
        + (dec + 2 * enc) * dec
        + dec
        + dec * vocab
        + 2 * enc * dec
        + dec * dec
        + dec
        + 2 * enc * dec
        + dec
    )


def rnn_hidden(
    vocab: int,
    emb: int,
    enc: int,
    dec: int,
    ours: int,
    tolerance: float = RNN_TOLERANCE,
    step: int = RNN_STEP,
) -> int:
    """Joey's decoder size: ours, or the largest multiple of step below it whose model is within
    tolerance of ours (Joey's output path, an attentional layer of the decoder's size then the
    vocabulary, is larger than our maxout)."""
    for h in range(dec, step - 1, -step):
        if rnn_params(vocab, emb, enc, h) <= (1 + tolerance) * ours:
            return h
    return step


def embed_init(std: float) -> dict:
    """Joey's embeddings drawn as ours, N(0, std²): under its default (Xavier-uniform, far smaller
    for a table of 2,000 × 128) its Transformer learnt much more slowly than ours on the same
    batches."""
    return {"embed_initializer": "normal", "embed_init_weight": std}


def recurrent_config(
    emb: int,
    dropout: float,
    rnn_type: str,
    encoder: int,
    bidirectional: bool,
    decoder: int,
    layers: int,
    init_hidden: str,
) -> dict:
    """Joey's recurrent encoder-decoder with its "bahdanau" (MLP) attention and input feeding,
    dropout everywhere it has one; embeddings N(0, 1) as torch.nn.Embedding's (ours)."""

    # a dict per side: one shared object would reach Joey's YAML as an anchor and alias
    def embeddings() -> dict:
        return {"embedding_dim": emb, "dropout": dropout}

    return {
        **embed_init(1.0),
        "encoder": {
            "type": "recurrent",
            "rnn_type": rnn_type,
            "bidirectional": bidirectional,
            "num_layers": layers,
            "hidden_size": encoder,
            "dropout": dropout,
            "embeddings": embeddings(),
        },
        "decoder": {
            "type": "recurrent",
            "rnn_type": rnn_type,
            "num_layers": layers,
            "hidden_size": decoder,
            "attention": "bahdanau",
            "input_feeding": True,
            "init_hidden": init_hidden,
            "dropout": dropout,
            "hidden_dropout": dropout,
            "embeddings": embeddings(),
        },
    }


def rnn_config(dims: dict, hidden: int) -> dict:
    """Joey's RNN + Bahdanau attention at our bahdanau sizes (conf/model/bahdanau.yaml):
    bidirectional GRU encoder, a bridge to a GRU decoder of size `hidden`."""
    return recurrent_config(
        dims["emb_dim"], dims["dropout"], "gru", dims["enc_hidden_dim"], True, hidden, 1, "bridge"
    )


def luong_config(dims: dict) -> dict:
    """Joey's RNN as Luong et al. 2015's global model at our luong_concat sizes
    (conf/model/luong_concat.yaml, tuned/): one-way LSTM encoder and decoder of our hidden size and
    layers, the decoder started from the encoder's last state, and Joey's "bahdanau" score vᵀ tanh(W
    h_t + U h̄_s), which is Luong's concat (eq. 8) queried with the new state."""
    hidden = dims["hidden_dim"]
    return recurrent_config(
        dims["emb_dim"], dims["dropout"], "lstm", hidden, False, hidden, dims["layers"], "last"
    )


def transformer_config(dims: dict) -> dict:
    """Joey's Transformer at our transformer sizes: pre-LN, one embedding for source, target and
    softmax, scaled."""
    side = {
        "type": "transformer",
        "num_layers": None,
        "num_heads": dims["heads"],
        "hidden_size": dims["d_model"],
        "ff_size": dims["d_ff"],
        "dropout": dims["dropout"],
        "layer_norm": "pre",
        "embeddings": {"embedding_dim": dims["d_model"], "scale": True, "dropout": dims["dropout"]},
    }
    # our N(0, 1/d)
    return {
        "tied_embeddings": True,
        "tied_softmax": True,
        **embed_init(dims["d_model"] ** -0.5),
        "encoder": {**side, "num_layers": dims["enc_layers"]},
        "decoder": {**side, "num_layers": dims["dec_layers"]},
    }


def joey_config(model: dict, data: Path, work: Path, train: dict, sizes: dict, seed: int) -> dict:
    """A whole Joey config: plain word-level files of our pieces, our vocabulary, Adam at our rate
    and clipping, sizes["updates"] batches of our size in file order, no validation while training
    (validation_freq past the last update, a multiple of logging_freq as Joey asks); greedy search
    for its own validation, sizes["decode_batch"]."""
    updates = sizes["updates"]
    side = {
        "level": "word",
        "lowercase": False,
        "normalize": False,
        "max_length": -1,
        "min_length": -1,
        "voc_file": str(data / "vocab.txt"),
    }
    return {
        "name": work.name,
        "joeynmt_version": "2.3.0",
        "use_cuda": False,
        "data": {
            "train": str(data / "train"),
            "dev": str(data / "dev"),
            "dataset_type": "plain",
            "src": {**side, "lang": LANGS[0]},
            "trg": {**side, "lang": LANGS[1]},
        },
        "testing": {
            "beam_size": 1,
            "batch_size": sizes["decode_batch"],
            "batch_type": "sentence",
            "max_output_length": -1,
            "eval_metrics": ["bleu"],
        },
        "training": {
            "model_dir": str(work),
            "overwrite": True,
            "random_seed": seed,
            "optimizer": "adam",
            "adam_betas": [0.9, 0.999],
            "learning_rate": train["lr"],
            "weight_decay": train["weight_decay"],
            "clip_grad_norm": train["clip"],
            "label_smoothing": train["label_smoothing"],
            "loss": "crossentropy",
            # the driver replaces it (WarmupConstant says why)
            "scheduling": "warmupinversesquareroot",
            "batch_size": train["batch_size"],
            "batch_type": "sentence",
            "normalization": "tokens",
            "shuffle": False,
            "epochs": 1,
            "max_updates": updates,
            "validation_freq": 2 * updates,
            "logging_freq": updates,
            "early_stopping_metric": "loss",
            "keep_best_ckpts": 1,
            "num_workers": 0,
            "print_valid_sents": [],
        },
        "model": {"initializer": "xavier_uniform", "bias_initializer": "zeros", **model},
    }


def run_joey(
    python: Path,
    cfg: dict,
    work: Path,
    warmup: int,
    max_len_ratio: float,
    sizes: dict,
    extra: list[str] = (),
) -> dict:
    """benchmarks/joey_driver.py on cfg (and `extra` arguments) in Joey's venv, one thread
    (OMP_NUM_THREADS=1); its JSON figures."""
    import yaml

    work.mkdir(parents=True, exist_ok=True)
    path, out = work.with_suffix(".yaml"), work.with_suffix(".json")
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    cmd = [
        str(python),
        str(ROOT / "benchmarks" / "joey_driver.py"),
        str(path),
        str(out),
        "--warmup-steps",
        str(warmup),
        "--max-len-ratio",
        str(max_len_ratio),
        "--decode-batch",
        str(sizes["decode_batch"]),
        *extra,
    ]
    done = subprocess.run(
        cmd,
        check=False,
        env={**env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=sizes["timeout"],
    )
    if done.returncode:
        raise RuntimeError(
            f"Joey NMT's driver failed ({' '.join(cmd)}):\n{done.stderr.strip()[-3000:]}"
        )
    return json.loads(out.read_text(encoding="utf-8"))


# Our side, and the pairs: ours and Joey's from the same seeds on the same batches


def our_config(family: str, data: Path):
    """params.yaml's config of a translate family (conf/, tuned/ merged), reading data under data,
    seed 0."""
    from attention_lab.core.config import load_config
    from benchmarks.train_speed import with_paths

    return with_paths(
        load_config(family=family, task="translate", root=ROOT), "translate", ROOT / "models", data
    )


def joey_model(family: str, dims: dict, vocab: int, params: int) -> tuple[dict, dict]:
    """(Joey's model config at our family's sizes, what was chosen for it): the RNN's decoder size
    keeps its parameters within RNN_TOLERANCE of ours."""
    if PAIRS[family] == "transformer":
        return transformer_config(dims), {}
    if PAIRS[family] == "rnn_luong":
        return luong_config(dims), {}
    sizes = vocab, dims["emb_dim"], dims["enc_hidden_dim"]
    hidden = rnn_hidden(*sizes, dims["dec_hidden_dim"], params)
    return rnn_config(dims, hidden), {
        "joey_dec_hidden": hidden,
        "joey_params_at_ours": rnn_params(*sizes, dims["dec_hidden_dim"]),
    }


def one_seed(family: str, seed: int, data: Path, work: Path, python: Path, sizes: dict) -> dict:
    """One family and Joey's model of the same size, from seed `seed`, on the same batches: the
    figures of both."""
    from omegaconf import OmegaConf

    from attention_lab.core.task import get_task

    cfg = our_config(family, data)
    cfg.seed = seed
    # a greedy call's and a validation batch's sentences
    sizes = {**sizes, "decode_batch": cfg.evaluate.batch_size}
    pl.seed_everything(seed, workers=True, verbose=False)  # as the train stage does before building
    module, dm = get_task("translate").build(cfg, seed)
    dims = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k != "_target_"}
    # Joey's encoder reads what ours reads
    reverse = PAIRS[family] == "rnn_luong" and dims["reverse_source"]
    exported = export(dm, sizes["updates"], work / "data", reverse_source=reverse)
    vocab = dm.tok.get_vocab_size()
    model, chosen = joey_model(
        family, dims, vocab, sum(p.numel() for p in module.model.parameters())
    )
    ours = train_ours(module, dm, cfg, sizes)
    train = OmegaConf.to_container(cfg.train, resolve=True)
    theirs = run_joey(
        python,
        joey_config(model, work / "data", work / family, train, sizes, seed),
        work / family,
        cfg.train.warmup_steps,
        cfg.evaluate.max_len_ratio,
        sizes,
    )
    if theirs["vocab"] != vocab:
        raise RuntimeError(f"Joey's vocabulary has {theirs['vocab']} entries, ours {vocab}")
    refs = [r["tgt"] for r in dm.splits["valid"]]
    ids = [[dm.tok.token_to_id(p) for p in h] for h in theirs["greedy"]["hypotheses"]]
    ours["bleu"], ours["greedy"] = (
        bleu(dm.tok, ours["greedy"]["hypotheses"], refs),
        outputs(ours["greedy"]),
    )
    theirs = {
        **summarise(theirs, sizes["skip"]),
        "bleu": bleu(dm.tok, ids, refs),
        "params": theirs["params"],
        "val_loss": theirs["val_loss"],
        "greedy": outputs(theirs["greedy"]),
        "torch": theirs["torch"],
        "threads": theirs["threads"],
    }
    return {
        "family": family,
        "joey_model": PAIRS[family],
        "dims": dims,
        "vocab": vocab,
        **exported,
        **chosen,
        "batch_size": cfg.train.batch_size,
        "lr": cfg.train.lr,
        "warmup_steps": cfg.train.warmup_steps,
        "clip": cfg.train.clip,
        "max_len_ratio": cfg.evaluate.max_len_ratio,
        "decode_batch": sizes["decode_batch"],
        "ours": ours,
        "joey": theirs,
    }


def mean_side(sides: list[dict]) -> dict:
    """One side's figures over seeds: numbers (also the greedy run's) averaged, the rest from the
    first seed; the validation losses of every seed under `val_losses`."""

    def mean(key, rows):
        values = [r[key] for r in rows]
        return sum(values) / len(values) if isinstance(values[0], float) else values[0]

    first = sides[0]
    return {
        **{k: mean(k, sides) for k in first if k != "greedy"},
        "greedy": {k: mean(k, [s["greedy"] for s in sides]) for k in first["greedy"]},
        "val_losses": [s["val_loss"] for s in sides],
    }


def pair(family: str, seeds: list[int], data: Path, work: Path, python: Path, sizes: dict) -> dict:
    """one_seed for every seed, ours and Joey's in turn; each side's figures averaged over them, and
    the verdict."""
    runs = [one_seed(family, seed, data, work / f"seed{seed}", python, sizes) for seed in seeds]
    ours, theirs = mean_side([r["ours"] for r in runs]), mean_side([r["joey"] for r in runs])
    return {
        **runs[0],
        "seeds": seeds,
        "same_batches": all(r["same_batches"] for r in runs),
        "ours": ours,
        "joey": theirs,
        **verdict(ours, theirs),
    }


class Clock(pl.Callback):
    """perf_counter at every training batch's start and end, and the batch's target tokens."""

    def __init__(self):
        self.starts, self.ends, self.cpu_starts, self.cpu_ends, self.tokens = [], [], [], [], []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.starts.append(time.perf_counter())
        self.cpu_starts.append(time.process_time())
        # </s> in, padding out, as Joey counts
        self.tokens.append(int((batch["tgt_out"] != PAD).sum()))

    # after the optimizer step
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.ends.append(time.perf_counter())
        self.cpu_ends.append(time.process_time())


def fit(module, dm, cfg, updates: int) -> dict:
    """The train stage's Trainer settings (conf/trainer, gradient clipping) for `updates` updates:
    no validation, logger, checkpoint or progress bar; the clock's figures."""
    import warnings

    from omegaconf import OmegaConf

    clock = Clock()
    options = {
        k: v
        for k, v in OmegaConf.to_container(cfg.trainer, resolve=True).items()
        if k not in ("log_every_n_steps", "enable_model_summary")
    }
    trainer = pl.Trainer(
        **options,
        max_steps=updates,
        max_epochs=-1,
        gradient_clip_val=cfg.train.clip,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        callbacks=[clock],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "few workers", "no val_dataloader"
        trainer.fit(module, datamodule=dm)
    return {k: getattr(clock, k) for k in ("starts", "ends", "cpu_starts", "cpu_ends", "tokens")}


def val_loss(module, rows: list[dict], batch: int) -> float:
    """Cross-entropy per target token (</s> in, padding out) over rows, teacher-forced, in eval
    mode."""
    from attention_lab.translate.data.batches import collate

    module.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(rows), batch):
            loss, n = module.loss(collate(rows[i : i + batch]))
            total, count = total + float(loss) * n, count + n
    return total / count


def greedy(model, rows: list[dict], ratio: float, batch: int) -> dict:
    """Our greedy search (translate_batch, beam 1) over rows in order, batch sentences a call; timed
    calls only."""
    from attention_lab.translate.search import translate_batch

    seconds, hyps = 0.0, []
    for i in range(0, len(rows), batch):
        t0 = time.perf_counter()
        out = translate_batch(
            model, [r["src_ids"] for r in rows[i : i + batch]], beam=1, max_len_ratio=ratio
        )
        seconds += time.perf_counter() - t0
        hyps += [h.tokens for h in out]
    return {"seconds": seconds, "sentences": len(hyps), "hypotheses": hyps}


def train_ours(module, dm, cfg, sizes: dict) -> dict:
    """Our side: fit, then validation loss and greedy decoding of the valid split."""
    clock = fit(module, dm, cfg, sizes["updates"])
    return {
        **summarise(clock, sizes["skip"]),
        "params": sum(p.numel() for p in module.model.parameters()),
        "val_loss": val_loss(module, dm.splits["valid"], sizes["decode_batch"]),
        "greedy": greedy(
            module.model, dm.splits["valid"], cfg.evaluate.max_len_ratio, sizes["decode_batch"]
        ),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def outputs(greedy: dict) -> dict:
    """A greedy run's seconds, sentences, sentences/s and mean output tokens (</s> not counted),
    hypotheses left out."""
    hyps = greedy["hypotheses"]
    return {
        "seconds": greedy["seconds"],
        "sentences": len(hyps),
        "sentences_per_s": len(hyps) / greedy["seconds"],
        "mean_tokens": sum(map(len, hyps)) / len(hyps),
    }


def bleu(tok, hyps: list[list[int]], refs: list[str]) -> float:
    """sacreBLEU corpus BLEU of token-id hypotheses, detokenized by our tokenizer, against the
    references."""
    from sacrebleu.metrics import BLEU

    from attention_lab.infer.tokenization import decode

    return BLEU().corpus_score(decode(tok, hyps), [refs]).score


def summarise(side: dict, skip: int) -> dict:
    """Wall and CPU ms per update and target tokens/s from update `skip` to the last, from
    per-update clocks (wall: perf_counter, CPU: the process's process_time) and tokens."""
    tokens, n = side["tokens"], len(side["tokens"])
    if (
        not all(len(side[k]) == n for k in ("starts", "ends", "cpu_starts", "cpu_ends"))
        or n <= skip
    ):
        raise RuntimeError(
            f"clocks of {[len(side[k]) for k in ('starts', 'ends', 'cpu_starts', 'cpu_ends')]} "
            f"updates and {n} token counts: need {n} each, more than {skip}"
        )
    wall, cpu = (
        side["ends"][-1] - side["starts"][skip],
        side["cpu_ends"][-1] - side["cpu_starts"][skip],
    )
    return {
        "updates": n,
        "timed_updates": n - skip,
        "ms_per_update": 1000 * wall / (n - skip),
        "cpu_ms_per_update": 1000 * cpu / (n - skip),
        "tokens_per_s": sum(tokens[skip:]) / wall,
        "tokens_per_cpu_s": sum(tokens[skip:]) / cpu,
        "train_tokens": sum(tokens),
    }


def verdict(ours: dict, theirs: dict) -> dict:
    """CPU time per update ours / Joey's (and wall time's), and whether ours is at least as fast at
    equal quality (QUALITY). CPU time: one thread each, so it is the work of an update, whatever
    else shares the cores."""
    ratio = ours["cpu_ms_per_update"] / theirs["cpu_ms_per_update"]
    equal = ours["val_loss"] <= (1 + QUALITY) * theirs["val_loss"]
    return {
        "time_ratio": ratio,
        "wall_ratio": ours["ms_per_update"] / theirs["ms_per_update"],
        "equal_quality": equal,
        "met": ratio <= 1 and equal,
    }


# The section: ours beside Joey NMT, every figure from the run's figures

COMMON = (
    "- Joey appends `</s>` to every source sentence; ours reads the source without it. Joey draws"
    " its embeddings as ours (N(0, 1) for the RNN's, N(0, 1/d_model) for the Transformer's) and its"
    " other weights by its default (Xavier-uniform, zero biases); ours are PyTorch's defaults, but"
    " for the Luong families' uniform [-0.1, 0.1] (Luong et al. §4.1; reports/benchmarks.md,"
    " Initialisation). The recipe (rate, warm-up, batch, dropout) is ours, tuned for our models"
    " (`tuned/<family>.yaml`), not for Joey's: its validation loss is what Joey reaches under our"
    " recipe."
)
INSTALL = (
    "- Installing: `joeynmt==2.3.0` declares `torch>=1.12`, so torch 2.13.0 (CPU) goes in first and"
    " stays; it imports `importlib_metadata` without declaring it (installed beside it)."
)
NAMES = {
    "bahdanau": "RNN + Bahdanau attention",
    "luong_concat": "RNN as Luong's global model (concat score)",
    "transformer": "Transformer",
}


def side_row(r: dict, who: str, name: str) -> list:
    s = r[who]
    g = s["greedy"]
    return [
        name,
        f"{s['params']:,}",
        num(s["cpu_ms_per_update"], 1),
        num(s["ms_per_update"], 1),
        num(s["tokens_per_cpu_s"], 0),
        num(s["tokens_per_s"], 0),
        num(s["val_loss"], 3),
        num(s["bleu"], 1),
        num(g["sentences_per_s"], 1),
        num(g["mean_tokens"], 1),
    ]


def losses(side: dict) -> str:
    """'seed 0: 0.863, seed 1: 0.871'."""
    return ", ".join(f"seed {i}: {x:.3f}" for i, x in enumerate(side["val_losses"]))


def verdict_line(r: dict, tolerance: float) -> str:
    o, j = r["ours"], r["joey"]
    met = "**met**" if r["met"] else "**not met**"
    quality = "equal quality" if r["equal_quality"] else f"more than {100 * tolerance:.0f}% worse"
    return (
        f"- {NAMES[r['family']]}: CPU time per update ours / Joey's **{r['time_ratio']:.2f}** (wall"
        f" time {r['wall_ratio']:.2f}), validation loss {o['val_loss']:.3f} ({losses(o)}) against"
        f" {j['val_loss']:.3f} ({losses(j)}): {quality}, {met}. Greedy sentences/s ours / Joey's"
        f" {o['greedy']['sentences_per_s'] / j['greedy']['sentences_per_s']:.2f}×. "
        + (
            f"Both trained on {o['train_tokens']:,} target tokens."
            if o["train_tokens"] == j["train_tokens"]
            else (
                f"Target tokens trained on: ours {o['train_tokens']:,}, Joey's"
                f" {j['train_tokens']:,}."
            )
        )
    )


def differences(rows: list[dict]) -> list[str]:
    """What the two sides do differently, with the run's own numbers."""
    lines = []
    for r in rows:
        d = r["dims"]
        if r["joey_model"] == "rnn":
            lines.append(
                f"- RNN: embeddings {d['emb_dim']}, bidirectional GRU encoder {d['enc_hidden_dim']}"
                f" a direction, dropout {d['dropout']:.3g} on both sides. Joey's decoder (GRU,"
                " Bahdanau's MLP attention, input feeding, a bridge from the encoder) feeds an"
                " attentional layer of its own size straight to the vocabulary, where ours has a"
                f" {d['maxout_dim']}-unit maxout; at our decoder size {d['dec_hidden_dim']} Joey's"
                f" model would have {r['joey_params_at_ours']:,} parameters, so its decoder is"
                f" **{r['joey_dec_hidden']}** (the largest multiple of {RNN_STEP} within"
                f" {100 * RNN_TOLERANCE:.0f}% of ours). Its attention hidden layer is the decoder's"
                f" size (ours: {d['attn_dim']}), and it queries with the new state (Luong's order),"
                " ours with the previous one (Bahdanau's)."
            )
        elif r["joey_model"] == "rnn_luong":
            lines.append(
                f"- Luong: the same model on both sides. Embeddings {d['emb_dim']}, a one-way LSTM"
                f" encoder and decoder of {d['hidden_dim']} units and {d['layers']} layer(s), each"
                " source read backwards (Joey's files hold it reversed), input feeding, h̃_t ="
                " tanh(W_c [c_t; h_t]) and the score vᵀ tanh(W h_t + U h̄_s) queried with the new"
                f" state, dropout {d['dropout']:.3g}. Joey starts the decoder's cell from the"
                " encoder's last hidden state (ours from its last cell), its attentional layer has"
                " a bias and its output layer none (ours the other way round), and it drops out"
                " the attentional layer's input, ours its output. Joey 2.3's encoder fails on a"
                " one-way RNN (it reads a backward state that is not there);"
                " `benchmarks/joey_driver.py` fixes that one line."
            )
        else:
            lines.append(
                f"- Transformer: d_model {d['d_model']}, {d['heads']} heads,"
                f" {d['enc_layers']}+{d['dec_layers']} layers, d_ff {d['d_ff']}, pre-LN, one scaled"
                " embedding for source, target and softmax, sinusoids: the same parameter count."
                " Joey also drops out attention weights and the feed-forward hidden layer (p ="
                f" {d['dropout']:.3g}; ours only sublayer outputs and embeddings, as Vaswani et al."
                " §5.4), and its greedy search runs the decoder over the whole prefix at every"
                " step (ours caches it)."
            )
    return lines


def recipe(rows: list[dict]) -> str:
    """'bahdanau 0.002, warm-up 200; ...': each pair's rate and warm-up updates."""
    return "; ".join(f"`{r['family']}` {r['lr']:.4g}, warm-up {r['warmup_steps']}" for r in rows)


def render(f: dict) -> list[str]:
    r0 = f["rows"][0]
    sizes = f["sizes"]
    batching = (
        ", so both see the same batches"
        if all(r["same_batches"] for r in f["rows"])
        else " (some of ours are short: the same sentences in the same order, batched apart)"
    )
    lines = [
        "## Side by side with a peer: Joey NMT",
        "",
        f"Produced by `{f['command']}` (`benchmarks/peers.py`) on {f['date']}; every figure below"
        " comes from that run."
        + (" **Quick mode: the figures only show that the benchmark runs.**" if f["quick"] else ""),
        "",
        (
            f"Joey NMT {f['joeynmt']} (its own virtualenv `.venv-peers`, torch"
            f" {r0['joey']['torch']}) and ours (torch {f['torch']}, `lightning.pytorch.Trainer`"
            f" with the train stage's settings) train each model for **{sizes['updates']} updates**"
            f" from each of {len(r0['seeds'])} seed(s) ({', '.join(map(str, r0['seeds']))}; the"
            f" figures are their means) on {r0['ours']['threads']} thread each, one after the other"
            " (ours, Joey's, the next seed), on our prepared translate data and BPE vocabulary"
            f" ({r0['vocab']:,} pieces: Joey reads our pieces as words). Joey's training file is"
            f" our first {sizes['updates']} batches in the order our Trainer draws them from that"
            f" seed, read in order by batches of {r0['batch_size']} sentences{batching}. Adam at"
            f" each family's tuned rate ({recipe(f['rows'])}) with linear warm-up, then constant"
            " (the rate of our plateau schedule before its first cut; Joey's own schedules cannot"
            f" do this, see `benchmarks/joey_driver.py`), gradient norm clipped at {r0['clip']},"
            " loss per target token."
        ),
        "",
        (
            "**ms / update** and **tokens** (target tokens, `</s>` in, padding out, the same count"
            f" on both sides) run from the start of update {sizes['skip']} to the end of the last:"
            " forward, backward, clipping, Adam and each framework's own loop and data loading;"
            " **CPU** time is the process's (`time.process_time`), the work of an update whatever"
            " else shares the cores, **wall** time (`time.perf_counter`) also counts the waits for"
            " a core. **Validation loss**: cross-entropy per target token over the"
            f" {r0['ours']['greedy']['sentences']} validation pairs after the last update."
            " **Greedy**: sentences/s of each framework's greedy search over the validation"
            f" sources, {r0['decode_batch']} a batch, at most {r0['max_len_ratio']}× the source"
            " tokens + 10 steps (our `evaluate.max_len_ratio` rule), neither emitting `<unk>`;"
            " **BLEU** of those outputs (sacreBLEU, our detokenizer for both) and their mean"
            " length (a model that has not learnt to stop decodes longer, and slower)."
        ),
        "",
    ]
    rows = []
    for r in f["rows"]:
        rows += [
            side_row(r, "ours", f"ours `{r['family']}`"),
            side_row(r, "joey", f"Joey NMT {NAMES[r['family']]}"),
        ]
    lines += table(
        [
            "model",
            "parameters",
            "CPU ms / update",
            "wall ms / update",
            "tokens / CPU s",
            "tokens/s",
            "val loss / token",
            "greedy BLEU",
            "greedy sentences/s",
            "greedy output tokens",
        ],
        rows,
    )
    target = (
        "Target: ours at least as fast per update (CPU time) at equal quality (mean validation"
        f" loss at most {100 * f['quality_tolerance']:.0f}% above Joey's):"
    )
    lines += ["", target, ""]
    lines += [verdict_line(r, f["quality_tolerance"]) for r in f["rows"]]
    lines += ["", "Where the two differ:", "", *differences(f["rows"]), COMMON, INSTALL, ""]
    load = " / ".join(", ".join(f"{x:.2f}" for x in f[k]) for k in ("load_before", "load_after"))
    lines += table(
        ["machine", ""],
        [
            ["CPU", f"{f['cpu']}, {f['cores']} cores"],
            [
                "torch threads per training process (ours / Joey)",
                f"{r0['ours']['threads']} / {r0['joey']['threads']}",
            ],
            ["load average before / after (1, 5, 15 min)", load],
            ["run time", f"{f['seconds']:.0f} s"],
        ],
    )
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=1000, help="training updates of every model")
    ap.add_argument(
        "--seeds", type=int, default=2, help="seeds 0, 1, ... of every model (figures: their mean)"
    )
    ap.add_argument(
        "--skip", type=int, default=20, help="first updates left out of the timing (warm-up)"
    )
    ap.add_argument(
        "--families", default=",".join(PAIRS), help=f"comma-separated subset of {list(PAIRS)}"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="20 updates, one seed: prints the section, writes no report unless --out is given",
    )
    ap.add_argument(
        "--data", type=Path, default=ROOT / "data", help="folder of prepared/ and tokenized/"
    )
    ap.add_argument(
        "--work", type=Path, default=None, help="keep Joey's data, configs and logs here"
    )
    ap.add_argument(
        "--venv", type=Path, default=None, help="Joey NMT's virtualenv (default .venv-peers)"
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="report to write (default reports/benchmarks.md)"
    )
    ap.add_argument(
        "--rerender", action="store_true", help="write the section again from --out's .json figures"
    )
    args = ap.parse_args(argv)
    if args.rerender:
        out = args.out or REPORT
        figures = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))[SECTION]
        write_marked_section(out, SECTION, render(figures), figures)
        return 0
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if unknown := sorted(set(families) - set(PAIRS)):
        ap.error(f"unknown families {unknown}; choose from {', '.join(PAIRS)}")
    updates = 20 if args.quick else args.updates
    sizes = {"updates": updates, "skip": min(args.skip, updates // 4), "timeout": 3600}
    seeds = list(range(1 if args.quick else args.seeds))
    out = args.out or (None if args.quick else REPORT)
    python = ensure_venv(args.venv or VENV)
    # no "GPU available: False" per fit
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    prepared("translate", args.data)  # the prepare and tokenize stages, when data/ lacks them
    torch.set_num_threads(1)
    load, t0 = os.getloadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        work = args.work or Path(tmp)
        rows = [pair(f, seeds, args.data, work / f, python, sizes) for f in families]
    figures = {
        "command": command(__file__, argv),
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "sizes": sizes,
        "quality_tolerance": QUALITY,
        "load_before": load,
        "load_after": os.getloadavg(),
        "seconds": time.perf_counter() - t0,
        "torch": torch.__version__,
        "joeynmt": JOEY.split("==")[1],
        "rows": rows,
        "quick": args.quick,
    }
    lines = render(figures)
    if out is None:
        print("\n".join(lines))
    else:
        write_marked_section(out, SECTION, lines, figures)
        print(
            f"wrote the section {SECTION} of {out} and its .json in {figures['seconds']:.0f} s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
