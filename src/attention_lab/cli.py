"""`attention-lab`: command-line entry point, and the commands that use an exported model
(translate, classify, caption, serve, register); the project's own (readme, config, stages, repro,
ledger, neutral), their arguments included, are in project.py. Subcommands import what they need
lazily, so `translate` never loads torch."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
from pathlib import Path

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from attention_lab.arguments import float_in, int_in


def resolve_model_dir(path: str | Path) -> Path:
    """Accept an exported folder (with meta.json) or a family folder holding it as onnx/."""
    path = Path(path)
    for candidate in (path, path / "onnx"):
        if (candidate / "meta.json").is_file():
            return candidate
    raise FileNotFoundError(
        f"{path}: no exported model here or in {path / 'onnx'} "
        "(run `dvc repro export_<task>@<family>` or pass the onnx folder)"
    )


def attention_table(
    words: list[str], tokens: list[str], weights, max_width: int | None = None
) -> str:
    """Source words as rows, target tokens as columns, weights with 2 decimals; wide tables wrap
    into blocks."""
    max_width = max_width or max(shutil.get_terminal_size((100, 24)).columns, 40)
    first = max(map(cell_len, words), default=0)  # terminal cells: Hangul and the like take two
    per_block = max((max_width - first) // (2 + max([4, *map(cell_len, tokens)])), 1)
    out = io.StringIO()
    console = Console(
        file=out,
        width=max_width,
        force_terminal=sys.stdout.isatty(),
        markup=False,
        emoji=False,
        highlight=False,
    )
    for start in range(0, len(tokens), per_block):
        cols = range(start, min(start + per_block, len(tokens)))
        table = Table(box=None, pad_edge=False)
        table.add_column()
        for j in cols:
            table.add_column(tokens[j], justify="right")
        for word, row in zip(words, weights):
            table.add_row(word, *(f"{row[j]:.2f}" for j in cols))
        console.print(table)
        console.line()
    return out.getvalue().rstrip("\n")


def _check_texts(texts: list[str], what: str, max_chars: int | None = None) -> None:
    """A ValueError naming the text (argument or stdin) that is not valid Unicode or is longer than
    max_chars."""
    for n, text in enumerate(texts, 1):
        try:
            text.encode("utf-8")
        # undecodable bytes reach Python as lone surrogates (surrogateescape)
        except UnicodeEncodeError as err:
            raise ValueError(
                f"{what} {n} holds bytes that are not UTF-8 ({err.object[err.start : err.end]!r} at"
                f" character {err.start}); send UTF-8 text"
            ) from err
        if max_chars is not None and len(text) > max_chars:
            raise ValueError(
                f"{what} {n} has {len(text)} characters; at most {max_chars} (--max-chars)"
            )


def _translate(args: argparse.Namespace) -> int:
    from attention_lab.translate.serve import OnnxTranslator

    sentences = [s for s in args.sentences if s.strip()] or [
        line.strip() for line in sys.stdin if line.strip()
    ]
    if not sentences:
        print(
            "attention-lab translate: no sentences given (as arguments or on stdin)",
            file=sys.stderr,
        )
        return 2
    _check_texts(sentences, "sentence", args.max_chars)
    translator = OnnxTranslator(resolve_model_dir(args.model), threads=args.threads)
    beam = args.beam if args.beam is not None else translator.meta.get("beam", 4)
    len_penalty = (
        args.len_penalty
        if args.len_penalty is not None
        else translator.meta.get("len_penalty", 1.0)
    )

    def show(r) -> None:
        print(f"source:      {r.source}")
        print(f"translation: {r.text}")
        if not r.has_attention:
            print(
                f"(no attention: {translator.meta['family']} conditions on a fixed summary vector)"
            )
        elif r.tokens:
            print(attention_table(r.source_words, r.tokens, r.attention))

    return _emit(
        translator.translate(sentences, beam=beam, len_penalty=len_penalty), args.json, show
    )


def _emit(results: list, as_json: bool, show) -> int:
    """Print results as one JSON list, or each with `show`, separated by blank lines."""
    if as_json:
        print(json.dumps([r.to_dict() for r in results], ensure_ascii=False, indent=2))
        return 0
    for k, r in enumerate(results):
        if k:
            print()
        show(r)
    return 0


def _classify(args: argparse.Namespace) -> int:
    from attention_lab.classify.serve import OnnxClassifier

    texts = args.texts or ([sys.stdin.read()] if not sys.stdin.isatty() else [])
    texts = [t for t in texts if t.strip()]
    if not texts:
        print(
            "attention-lab classify: no document given (as arguments or on stdin)", file=sys.stderr
        )
        return 2
    _check_texts(texts, "document")
    classifier = OnnxClassifier(resolve_model_dir(args.model), threads=args.threads)

    def show(r) -> None:
        print(f"label: {r.label}")
        print(
            "probabilities: "
            + ", ".join(
                f"{label} {p:.3f}"
                for label, p in sorted(r.probabilities.items(), key=lambda kv: -kv[1])
            )
        )
        if r.sentence_weights is None:
            print(f"(no attention: {classifier.meta['family']} pools without weights)")
        for weight, sentence in r.top_sentences(args.top):
            print(f"  {weight:.2f}  {sentence}")

    return _emit(classifier.classify(texts), args.json, show)


def _caption(args: argparse.Namespace) -> int:
    """Caption digit canvases (PNG) or photos (JPEG/PNG, any size) with an exported captioner; write
    each one's per-word attention overlay."""
    from attention_lab.caption.serve import OnnxCaptioner

    captioner = OnnxCaptioner(resolve_model_dir(args.model), threads=args.threads)
    # every image is checked before any output is written
    images = [captioner.read(path) for path in args.images]
    results = captioner.caption(images, beam=args.beam)
    for path, image, r in zip(args.images, images, results):
        if args.overlay_dir is not None:
            out = Path(args.overlay_dir) / f"{Path(path).stem}_attention.png"
            out.parent.mkdir(parents=True, exist_ok=True)
            captioner.overlay(image, r).save(out)
            r.overlay = str(out)

    def show(r) -> None:
        print(r.text + (f"  (attention: {r.overlay})" if r.overlay else ""))

    return _emit(results, args.json, show)


def _serve(args: argparse.Namespace) -> int:
    """The HTTP service and explorer page over every exported folder under --models (+ MLflow
    registry models)."""
    import tempfile

    # removed when the server stops
    with tempfile.TemporaryDirectory(prefix="attention-lab-registry-") as fetched:
        return _serve_from(args, Path(fetched))


def _serve_from(args: argparse.Namespace, fetched: Path) -> int:
    import uvicorn

    from attention_lab.serving.app import ServeSettings, create_app
    from attention_lab.serving.registry import discover, load_model

    models, skipped = (
        discover(args.models, args.threads) if Path(args.models).is_dir() else ({}, [])
    )
    for i, ref in enumerate(args.registry_model):
        from attention_lab.core.tracking import default_tracking_uri
        from attention_lab.serving.mlflow_models import fetch_folder

        name, uri, folder = fetch_folder(
            ref, str(fetched / str(i)), default_tracking_uri(Path.cwd())
        )
        if name in models:
            raise ValueError(
                f"registry model {name!r} has the name of a folder under {args.models}"
            )
        models[name] = load_model(folder, name, args.threads, source=uri)
    if not models:
        raise ValueError(
            f"no servable model under {args.models!r} (models/<family>/onnx) nor from"
            " --registry-model"
            + "".join(f"\n  skipped {s['path']}: {s['reason']}" for s in skipped)
        )
    for s in skipped:
        print(f"attention-lab serve: skipped {s['path']}: {s['reason']}", file=sys.stderr)
    print(
        f"attention-lab serve: {len(models)} models ({', '.join(sorted(models))}); explorer page at"
        f" http://{args.host}:{args.port}/",
        file=sys.stderr,
    )
    app = create_app(
        models,
        ServeSettings(
            max_chars=args.max_chars,
            max_body_bytes=args.max_body,
            max_image_bytes=args.max_image_body,
        ),
        skipped,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _register(args: argparse.Namespace) -> int:
    """Log an exported folder as a pyfunc model in the MLflow model registry (it serves itself)."""
    from attention_lab.core.tracking import default_tracking_uri
    from attention_lab.serving.mlflow_models import log_folder

    folder = resolve_model_dir(args.model).resolve()
    name = args.name or (folder.parent.name if folder.name == "onnx" else folder.name)
    uri = default_tracking_uri(Path.cwd())
    version = log_folder(folder, name, uri)
    print(f"registered {folder} as {name} version {version} in {uri}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from attention_lab import project
    from attention_lab.serving.schemas import MAX_BEAM

    beam, threads = int_in(1, MAX_BEAM), int_in(1, 1024)
    parser = argparse.ArgumentParser(
        prog="attention-lab", description="The attention timeline of NLP, reproduced."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser(
        "translate", help="translate with an exported ONNX model (onnxruntime only, no torch)"
    )
    t.add_argument(
        "sentences", nargs="*", help="English sentences (default: one per line on stdin)"
    )
    t.add_argument(
        "--model",
        default="models/bahdanau",
        help="a family folder (models/bahdanau) or its onnx folder (default: %(default)s)",
    )
    t.add_argument(
        "--beam",
        type=beam,
        default=None,
        help=f"beam size, 1 (greedy) to {MAX_BEAM} (default: the exported default)",
    )
    t.add_argument(
        "--len-penalty",
        type=float_in(0.0, 5.0),
        default=None,
        help="GNMT length penalty alpha, 0 to 5",
    )
    t.add_argument(
        "--max-chars",
        type=int_in(1),
        default=5000,
        help="longest sentence accepted, as `serve --max-chars` (default: %(default)s)",
    )
    t.add_argument(
        "--threads",
        type=threads,
        default=1,
        help="onnxruntime intra-op threads (default: %(default)s)",
    )
    t.add_argument(
        "--json", action="store_true", help="print JSON (translation, tokens, word attention)"
    )
    t.set_defaults(func=_translate)
    c = sub.add_parser(
        "classify",
        help="classify documents with an exported ONNX model (onnxruntime only, no torch)",
    )
    c.add_argument("texts", nargs="*", help="documents (default: one document read from stdin)")
    c.add_argument(
        "--model",
        default="models/han",
        help="a family folder (models/han) or its onnx folder (default: %(default)s)",
    )
    c.add_argument(
        "--top",
        type=int_in(0),
        default=3,
        help="most attended sentences to print (default: %(default)s)",
    )
    c.add_argument(
        "--threads",
        type=threads,
        default=1,
        help="onnxruntime intra-op threads (default: %(default)s)",
    )
    c.add_argument(
        "--json",
        action="store_true",
        help="print JSON (label, probabilities, sentence and word weights)",
    )
    c.set_defaults(func=_classify)
    p = sub.add_parser(
        "caption",
        help="caption digit canvases or photos with an exported ONNX model (onnxruntime only, "
        "no torch)",
    )
    p.add_argument(
        "images",
        nargs="+",
        help="photos (JPEG or PNG, any size) for a photo model; PNG images of the "
        "canvas size (ink bright on dark) for a canvas model",
    )
    p.add_argument(
        "--model",
        default="models/show_attend_tell",
        help="a family folder (models/show_attend_tell) or its onnx folder (default: %(default)s)",
    )
    p.add_argument(
        "--overlay-dir",
        default=".",
        help="where <image>_attention.png goes (default: the current folder)",
    )
    p.add_argument(
        "--beam",
        type=beam,
        default=None,
        help=f"beam size, 1 (greedy) to {MAX_BEAM} (default: the exported default)",
    )
    p.add_argument(
        "--threads",
        type=threads,
        default=1,
        help="onnxruntime intra-op threads (default: %(default)s)",
    )
    p.add_argument(
        "--json", action="store_true", help="print JSON (caption, words, attention grids)"
    )
    p.set_defaults(func=_caption)
    s = sub.add_parser(
        "serve", help="HTTP service + attention explorer page (onnxruntime only, no torch)"
    )
    s.add_argument(
        "--models", default="models", help="folder of <family>/onnx exports (default: %(default)s)"
    )
    s.add_argument(
        "--registry-model",
        action="append",
        default=[],
        metavar="NAME[/VERSION]",
        help="also serve this MLflow registered model (latest version by default) from "
        "MLFLOW_TRACKING_URI (default: sqlite:///mlflow.db); repeatable",
    )
    s.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    s.add_argument("--port", type=int_in(1, 65535), default=8000, help="(default: %(default)s)")
    s.add_argument(
        "--max-chars",
        type=int_in(1),
        default=5000,
        help="longest text accepted (default: %(default)s)",
    )
    s.add_argument(
        "--max-body",
        type=int_in(1),
        default=65536,
        help="largest request body in bytes (default: %(default)s)",
    )
    s.add_argument(
        "--max-image-body",
        type=int_in(1),
        default=16 << 20,
        help="largest POST /caption body (a photo upload) in bytes (default: %(default)s)",
    )
    s.add_argument(
        "--threads",
        type=threads,
        default=1,
        help="onnxruntime intra-op threads per session (default: 1)",
    )
    s.add_argument("--log-level", default="info", help="uvicorn log level (default: %(default)s)")
    s.set_defaults(func=_serve)
    g = sub.add_parser(
        "register",
        help="log an exported model to the MLflow model registry "
        "(MLFLOW_TRACKING_URI) as a pyfunc model that `mlflow models serve` serves",
    )
    g.add_argument("--model", required=True, help="a family folder (models/han) or its onnx folder")
    g.add_argument(
        "--name", default=None, help="registered model name (default: the folder's name)"
    )
    g.set_defaults(func=_register)
    project.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as err:
        print(f"attention-lab {args.command}: {err}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:  # the serving install lacks the pipeline's packages
        print(
            f"attention-lab {args.command}: {err}; this needs the pipeline install (make setup)",
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
