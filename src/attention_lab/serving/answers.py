"""What a served model answers for one input: the JSON of POST /translate, /classify, /caption
but its latency, shared by the HTTP service (app.py) and the MLflow pyfunc (mlflow_models.py)."""

from __future__ import annotations

import base64
import io

from attention_lab.serving.registry import LoadedModel, has_attention


def search_defaults(model: LoadedModel) -> dict:
    """The search options a request may leave out, as exported: beam (and len_penalty)."""
    meta = model.runner.meta
    if model.task == "translate":
        return {
            "beam": int(meta.get("beam", 4)),
            "len_penalty": float(meta.get("len_penalty", 1.0)),
        }
    return {"beam": int(meta.get("beam", 1))} if model.task == "caption" else {}


def translate(
    model: LoadedModel, text: str, beam: int | None = None, len_penalty: float | None = None
) -> dict:
    """Tokens, translation and cross-attention of one sentence (search options: the export's)."""
    defaults = search_defaults(model)
    beam = beam or defaults["beam"]
    len_penalty = defaults["len_penalty"] if len_penalty is None else len_penalty
    [result] = model.runner.translate([text], beam=beam, len_penalty=len_penalty)
    return {**result.to_dict(), "model": model.name, "family": model.family, "beam": beam}


def classify(model: LoadedModel, text: str) -> dict:
    """Label, probabilities, word and sentence attention of one document (ValueError: no words)."""
    [result] = model.runner.classify([text])
    return {
        **result.to_dict(),
        "model": model.name,
        "family": model.family,
        "has_attention": has_attention(model),
    }


def caption(model: LoadedModel, image: bytes, name: str, beam: int | None = None) -> dict:
    """Caption, attention per word and overlay PNG of an image file's bytes (ImageError: bad)."""
    captioner = model.runner
    pixels = captioner.read(image, name=name)
    beam = beam or search_defaults(model)["beam"]
    [result] = captioner.caption([pixels], beam=beam)
    buf = io.BytesIO()
    captioner.overlay(pixels, result).save(buf, format="PNG")
    return {
        "model": model.name,
        "family": model.family,
        "caption": result.text,
        "words": result.words,
        "attention": result.attention.round(4).tolist(),
        "grid": list(captioner.meta["grid"]),
        "has_attention": result.has_attention,
        "score": result.score,
        "beam": beam,
        "overlay": "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii"),
    }
