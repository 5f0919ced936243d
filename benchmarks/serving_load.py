"""Bounded load test of `attention-lab serve` on loopback: N requests per task, C concurrent, ->
reports/serving.md.

    python benchmarks/serving_load.py --models models            # the exported families
    python benchmarks/serving_load.py --tiny                      # tiny random-weight exports in a
    temp dir

Starts the server on 127.0.0.1:<free port>, checks that every request got 200, and reports
client-side p50/p99 latency and throughput per task (plus the server's own latency_ms). Exits 1 if
any request failed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: finds the package
from benchmarks.common import ROOT, command, shown_path

INPUTS = {
    "translate": [
        "the young man reads a book in the library",
        "the cat sat on the mat",
        "a dog runs in the park",
        "my friend reads the book",
        "the bird sings a song",
    ],
    "classify": [
        (
            "The hotel was booked months in advance. At first the room seemed dirty, but in the end"
            " it was wonderful."
        ),
        "The food was not good. We left early!",
        "The room was lovely.",
        "The parking lot next door was awful. The staff was friendly and the breakfast was great.",
    ],
}


def canvases(meta: dict, n: int = 4) -> list[bytes]:
    """PNG bytes of n built-in digit canvases (2 to 4 real handwritten scans) drawn as
    conf/data/caption draws them, rescaled to the served model's canvas size."""
    import io

    from PIL import Image

    from attention_lab.caption.data.digits import compose, scans
    from attention_lab.core.config import load_config

    data = load_config(root=ROOT, task="caption").data
    height, width, rng = meta["height"], meta["width"], np.random.default_rng(0)
    scale = height / data.height
    sizes = tuple(round(s * scale) for s in data.digit_size)
    pool = np.arange(len(scans()[0]))
    out = []
    for k in range(n):
        image, _, _ = compose(
            rng,
            pool,
            2 + k % 3,
            height,
            width,
            sizes,
            round(data.max_gap * scale),
            round(data.max_offset * scale),
            data.noise,
        )
        buffer = io.BytesIO()
        Image.fromarray(np.round(image * 255).astype(np.uint8)).save(buffer, format="PNG")
        out.append(buffer.getvalue())
    return out


def multipart(fields: dict[str, str], png: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body (the fields and `image`) and its Content-Type."""
    boundary = "attention-lab-load-test"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="canvas.png"\r\n'
        "Content-Type: image/png\r\n\r\n".encode()
        + png
        + b"\r\n"
    )
    return b"".join(
        parts
    ) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(models: Path, port: int) -> subprocess.Popen:
    """`attention-lab serve` on loopback; returns once /health answers (60 s at most)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attention_lab.cli",
            "serve",
            "--models",
            str(models),
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("the server did not start within 60 s")


def get(port: int, path: str):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    return json.loads(conn.getresponse().read())


def load(
    port: int, task: str, model: str, n: int, concurrency: int, beam: int, models: Path
) -> dict:
    """n POST /<task> requests over `concurrency` keep-alive connections -> latencies, errors, wall
    time."""
    local = threading.local()
    if task == "caption":  # PNG uploads of the model's canvas size
        meta = json.loads((models / model / "onnx" / "meta.json").read_text(encoding="utf-8"))
        bodies = [multipart({"model": model, "beam": str(beam)}, png) for png in canvases(meta)]
    else:
        bodies = [
            (
                json.dumps(
                    {"model": model, "text": t, **({"beam": beam} if task == "translate" else {})}
                ).encode(),
                "application/json",
            )
            for t in INPUTS[task]
        ]

    def one(i: int) -> tuple[float, float | None, str | None]:
        if not hasattr(local, "conn"):
            local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        start = time.perf_counter()
        try:
            body, content_type = bodies[i % len(bodies)]
            local.conn.request("POST", f"/{task}", body, {"Content-Type": content_type})
            response = local.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as err:
            local.conn.close()
            del local.conn
            return time.perf_counter() - start, None, repr(err)
        elapsed = time.perf_counter() - start
        if response.status != 200:
            return elapsed, None, f"HTTP {response.status}: {data[:200]!r}"
        return elapsed, json.loads(data)["latency_ms"], None

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(2 * concurrency)))  # warm-up: connections and sessions
        start = time.perf_counter()
        results = list(pool.map(one, range(n)))
        wall = time.perf_counter() - start
    latency = np.array([r[0] for r in results]) * 1000
    server = np.array([r[1] for r in results if r[1] is not None])
    errors = [r[2] for r in results if r[2]]
    return {
        "task": task,
        "model": model,
        "requests": n,
        "concurrency": concurrency,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "p50": float(np.percentile(latency, 50)),
        "p90": float(np.percentile(latency, 90)),
        "p99": float(np.percentile(latency, 99)),
        "max": float(latency.max()),
        "server_p50": float(np.percentile(server, 50)) if len(server) else None,
        "throughput": n / wall,
        "wall": wall,
    }


def render(rows: list[dict], args: argparse.Namespace, models_desc: str, quoted: str) -> str:
    lines = [
        "# Serving load test",
        "",
        (
            f"`{quoted}`: one `attention-lab serve` process (uvicorn, onnxruntime with 1 intra-op"
            f" thread per session) on 127.0.0.1, {args.requests} requests per task,"
            f" {args.concurrency} concurrent keep-alive connections, after a warm-up of"
            f" {2 * args.concurrency}. Client and server share the machine: {os.cpu_count()} CPU"
            f" cores ({platform.processor() or platform.machine()}), Python"
            f" {platform.python_version()}."
        ),
        "",
        (
            f"Models: {models_desc}. Translation and captioning decode with beam {args.beam};"
            " captioning uploads PNG canvases of 2 to 4 built-in handwritten digits at the model's"
            " canvas size."
        ),
        "",
        (
            "| task | model | requests | concurrent | errors | p50 ms | p90 ms | p99 ms | max ms |"
            " server p50 ms | throughput req/s |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        server = f"{r['server_p50']:.1f}" if r["server_p50"] is not None else "—"
        lines.append(
            f"| {r['task']} | `{r['model']}` | {r['requests']:,} | {r['concurrency']} |"
            f" {r['errors']} | {r['p50']:.1f} | {r['p90']:.1f} | {r['p99']:.1f} | {r['max']:.1f} |"
            f" {server} | {r['throughput']:.0f} |"
        )
    ok = all(r["errors"] == 0 for r in rows)
    lines += [
        "",
        (
            f"Zero-error check: {'passed' if ok else 'FAILED'} ({sum(r['errors'] for r in rows)}"
            f" failed of {sum(r['requests'] for r in rows):,} requests)."
        ),
    ]
    lines += [f"First error ({r['task']}): `{r['first_error']}`" for r in rows if r["first_error"]]
    lines += [
        "",
        (
            "Latency is measured by the client (request sent to response read); server p50 is the"
            " service's own `latency_ms` (tokenize, run the graphs, search)."
        ),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=None, help="folder of <family>/onnx exports")
    parser.add_argument(
        "--tiny", action="store_true", help="serve tiny random-weight exports (made with torch)"
    )
    parser.add_argument(
        "--translate-model", default=None, help="default: the first translate model listed"
    )
    parser.add_argument(
        "--classify-model", default=None, help="default: the first classify model listed"
    )
    parser.add_argument(
        "--caption-model", default=None, help="default: the first caption model listed"
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--beam", type=int, default=1, help="translation beam (1 = greedy)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "serving.md")
    args = parser.parse_args(argv)
    if args.tiny == (args.models is not None):
        parser.error("pass exactly one of --models DIR and --tiny")
    if args.tiny:
        sys.path.insert(0, str(ROOT))
        os.chdir(ROOT)
        from tests.tiny_models import export_tiny_models

        args.models = export_tiny_models(Path(tempfile.mkdtemp(prefix="serving-load-")))
    port = free_port()
    proc = start_server(args.models.resolve(), port)
    try:
        listed = get(port, "/models")
        chosen = {
            "translate": args.translate_model,
            "classify": args.classify_model,
            "caption": args.caption_model,
        }
        rows = []
        for task in ("translate", "classify", "caption"):
            names = [m["name"] for m in listed if m["task"] == task]
            model = chosen[task] or (names[0] if names else None)
            if model is None:
                print(f"no {task} model served: skipped", file=sys.stderr)
                continue
            rows.append(
                load(port, task, model, args.requests, args.concurrency, args.beam, args.models)
            )
            print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    desc = (
        "tiny random-weight exports (`tests/tiny_models.py`)"
        if args.tiny
        else f"`{shown_path(args.models, '--models')}`"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(rows, args, desc, command(__file__, argv)), encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0 if rows and all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
