"""benchmarks/speed.py --quick on tiny random-weight models: every measured section is written, with
finite figures, and a retired one is kept as measured; photo_pipeline.py's photos and section;
pipeline_cost.py's stage times."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, copy_project
from tests.tiny_models import (
    CANVAS,
    DIGIT_WORDS,
    DOCS,
    LABELS,
    PAIRS,
    STAGE_TINY,
    export_caption,
    export_classify,
    stage_overrides,
)

pytestmark = pytest.mark.slow  # it runs the benchmarks: `make test-fast` leaves it out


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )


def tiny_translate(root: Path, family: str = "transformer") -> None:
    """root/models/<family>/{checkpoints/seed0/best.ckpt, onnx} from a tiny random model,
    root/data/*/translate."""
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from attention_lab.core.config import load_config
    from attention_lab.infer.tokenization import PAD, train_tokenizer
    from attention_lab.translate.export import export_model

    rows = [{"id": f"t-{i}", "src": s, "tgt": t} for i, (s, t) in enumerate(PAIRS)]
    for split in ("train", "valid", "test"):
        write_jsonl(root / "data" / "prepared" / "translate" / f"{split}.jsonl", rows)
    tok_path = root / "data" / "tokenized" / "translate" / "tokenizer.json"
    tok = train_tokenizer(
        [s for pair in PAIRS for s in pair] * 3, "bpe", vocab_size=120, min_frequency=1
    )
    tok_path.parent.mkdir(parents=True)
    tok.save(str(tok_path))
    cfg = load_config(stage_overrides(family), family=family, root=ROOT)
    torch.manual_seed(0)
    model = instantiate(cfg.model, vocab_size=tok.get_vocab_size(), pad_id=PAD).eval()
    ckpt = root / "models" / family / "checkpoints" / "seed0" / "best.ckpt"
    ckpt.parent.mkdir(parents=True)
    hparams = {"cfg": OmegaConf.to_container(cfg, resolve=True), "vocab_size": tok.get_vocab_size()}
    torch.save(
        {
            "hyper_parameters": hparams,
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
        },
        ckpt,
    )
    export_model(
        model, root / "models" / family / "onnx", family, tok_path, max_len_ratio=0.5, beam=1
    )


def tiny_setup(root: Path) -> Path:
    """Tiny translate (checkpoint and export), classify and caption exports, and their data under
    root."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tiny_translate(root)
        export_classify(root / "models")
        export_caption(root / "models")
    finally:
        torch.set_num_threads(threads)
    docs = [
        {"id": f"d-{i}", "label": LABELS[i % 3], "sentences": d} for i, d in enumerate(DOCS * 2)
    ]
    write_jsonl(root / "data" / "prepared" / "classify" / "test.jsonl", docs)
    rng = np.random.default_rng(0)
    captions = [" ".join(rng.choice(DIGIT_WORDS, 2)) for _ in range(4)]
    write_jsonl(
        root / "data" / "prepared" / "caption" / "test.jsonl",
        [{"id": f"c-{i}", "caption": c} for i, c in enumerate(captions)],
    )
    np.save(
        root / "data" / "prepared" / "caption" / "test.npy",
        rng.integers(0, 256, (4, *CANVAS), dtype=np.uint8),
    )
    return root / "models"


def finite_positive(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x) and x > 0


def test_quick_benchmark_writes_every_section(tmp_path, one_torch_thread):
    from benchmarks.speed import main

    models = tiny_setup(tmp_path)
    out = tmp_path / "reports" / "benchmarks.md"
    sections = "ort,flops"  # settings: test_settings_side_by_side below
    assert (
        main(
            [
                "--models",
                str(models),
                "--quick",
                "--threads",
                "1",
                "--sections",
                sections,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = out.read_text(encoding="utf-8")
    for heading in (
        "# Speed benchmarks",
        "## Targets",
        "## 1. onnxruntime vs eager torch",
        "### Session options",
        "## 4. Achieved FLOP/s",
        "| CPU |",
        "| onnxruntime |",
    ):
        assert heading in text, heading
    results = json.loads(out.with_suffix(".json").read_text())["results"]
    (ort,) = results["ort"]["rows"]
    assert ort["family"] == "transformer"
    for key in ("torch_b1_ms", "ort_b1_ms", "speedup_b1", "torch_b32", "ort_b32", "speedup_b32"):
        assert finite_positive(ort[key]), key
    assert 0 <= ort["agree_b1"] <= 100 and 0 <= ort["agree_b32"] <= 100
    assert "same tokens b1 %" in text
    (flops,) = results["flops"]["rows"]  # only the translate family has a checkpoint
    assert finite_positive(flops["mflop_per_step"]) and 0 < flops["share"] < 10
    with pytest.raises(SystemExit):  # a retired study is not measured again
        main(["--models", str(models), "--quick", "--sections", "lightning", "--out", str(out)])


def test_a_run_of_some_sections_keeps_the_others_marked_with_their_run(tmp_path, one_torch_thread):
    """--sections flops rewrites section 4 and keeps sections 1, 2, 3 and 5 of the earlier report
    (text, figures and the targets they feed; 2, 3 and 5 are retired studies), each marked with the
    command, date and machine that measured it; kept twice, marked once."""
    from benchmarks.speed import earlier_sections, main

    models, out = tiny_setup(tmp_path), tmp_path / "reports" / "benchmarks.md"
    out.parent.mkdir(parents=True)
    titles = [
        "1. onnxruntime",
        "2. Our Transformer",
        "3. Lightning",
        "4. Achieved FLOP/s",
        "5. Dynamic int8",
    ]
    out.write_text(
        "# Speed benchmarks\n\nProduced by `python benchmarks/speed.py --models old`.\n\n"
        "| machine |  |\n|---|---|\n| CPU | Old CPU (avx2), 2 cores |\n| date | 2026-01-01 |\n\n"
        + "".join(f"## {t}\n\nold figures of {t[0]}\n\n" for t in titles)
    )
    ort = {"rows": [{"family": "bahdanau", "speedup_b1": 3.5}], "chosen": [1, "basic"]}
    out.with_suffix(".json").write_text(
        json.dumps({"results": {"ort": ort, "lightning": {"ratio": 1.05}, "flops": {"rows": []}}})
    )
    args = [
        "--models",
        str(models),
        "--quick",
        "--threads",
        "1",
        "--sections",
        "flops",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    text = out.read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if re.match(r"## \d\. ", line)]
    assert [h[3:5] for h in headings] == ["1.", "2.", "3.", "4.", "5."]
    assert "old figures of 4" not in text and "## 4. Achieved FLOP/s in training" in text
    for n in "1235":
        assert f"old figures of {n}" in text
    kept = (
        "_Kept from an earlier run: `python benchmarks/speed.py --models old`, 2026-01-01, on Old"
        " CPU (avx2), 2 cores._"
    )
    assert text.count(kept) == 4
    assert "except in the sections marked as kept from an earlier one" in text
    # kept figures still feed their targets
    assert "lowest 3.50× (bahdanau)" in text and "| 1.050 | met |" in text
    results = json.loads(out.with_suffix(".json").read_text())["results"]
    assert (
        results["ort"] == ort
        and results["lightning"] == {"ratio": 1.05}
        and results["flops"]["rows"]
    )
    # what a next run keeps: each section marked once, by its own run
    kept_again, _ = earlier_sections(out)
    notes = {
        s: [line for line in kept_again[s] if line.startswith("_Kept")] for s in ("ort", "flops")
    }
    assert len(notes["ort"]) == len(notes["flops"]) == 1
    assert "--models old" in notes["ort"][0] and "--sections flops" in notes["flops"][0]


def tiny_settings(dest: Path, processes: int, batch_size: int) -> Path:
    """A tiny-profile copy of the project: bahdanau at STAGE_TINY sizes, train.processes and batch
    size as given."""
    root = copy_project(dest)
    sizes = ", ".join(f"{k}: {v}" for k, v in STAGE_TINY["bahdanau"].items())
    line = f"    bahdanau: {{model: {{{sizes}}}, train: {{batch_size: {batch_size}}}}}"
    params = re.sub(
        r"^    bahdanau: .*$", line, (root / "params.yaml").read_text(), count=1, flags=re.MULTILINE
    )
    (root / "params.yaml").write_text(params)
    profile = root / "conf" / "profile" / "tiny.yaml"
    # translate's
    profile.write_text(profile.read_text().replace("processes: 1", f"processes: {processes}", 1))
    return root


def test_settings_side_by_side(tmp_path):
    """Section 6 on one tiny family, 2 steps: one process on every core against two single-thread
    processes."""
    import os

    from benchmarks.speed import QUICK
    from benchmarks.train_speed import render_settings, settings_rates

    before = tiny_settings(tmp_path / "before", 1, 16)
    after = tiny_settings(tmp_path / "after", 2, 32)
    r = settings_rates(
        str(before), ["bahdanau"], tmp_path / "models", {**QUICK, "side_steps": 2}, after=after
    )
    assert r["errors"] == []
    (row,) = r["rows"]
    b, a = row["before"], row["after"]
    assert (b["processes"], b["threads"], a["processes"], a["threads"]) == (1, os.cpu_count(), 2, 1)
    assert (b["batch_size"], a["batch_size"]) == (16, 32)
    # two processes, their timed steps at the same time
    assert len(set(a["pids"])) == 2 and a["overlapped"]
    for side in (b, a):
        for key in ("tokens_per_s", "gflops", "share", "tokens_per_update"):
            assert finite_positive(side[key]), key
    assert finite_positive(row["ratio"]) and a["tokens_per_update"] > b["tokens_per_update"]
    text = "\n".join(render_settings(r))
    assert (
        "## 6. Today's settings against the new ones" in text and "| bahdanau | translate |" in text
    )


def test_the_photo_pipeline_section_survives_a_speed_rewrite(tmp_path):
    """benchmarks/photo_pipeline.py writes its section between markers (and its .json key);
    speed.py's rewrite of the report keeps both, and a second write replaces the section instead of
    adding one."""
    from benchmarks.common import keep_marked_sections, write_marked_section

    md = tmp_path / "benchmarks.md"
    md.write_text("# Speed benchmarks\n\nold body\n")
    write_marked_section(md, "photo_pipeline", ["## Photos", "first"], {"total_seconds": 1.0})
    write_marked_section(md, "photo_pipeline", ["## Photos", "second"], {"total_seconds": 2.0})
    assert (
        md.read_text().count("## Photos") == 1
        and "second" in md.read_text()
        and "old body" in md.read_text()
    )
    text, summary = keep_marked_sections(md, "# Speed benchmarks\n\nnew body\n", {"results": {}})
    assert "new body" in text and "second" in text and "old body" not in text
    assert summary == {"results": {}, "photo_pipeline": {"total_seconds": 2.0}}


def test_the_drawn_photo_set_reads_as_flickr8k(tmp_path):
    """The benchmark's photos: JPEGs of Flickr8k-like sizes, five captions each, read by the
    image_captions source."""
    from PIL import Image

    from attention_lab.caption.data.photos import read_captions
    from benchmarks.photo_pipeline import SIZES, write_photo_set

    info = write_photo_set(tmp_path, 6)
    captions, _ = read_captions(tmp_path / "captions.txt")
    assert info["captions"] == 30 and sorted(captions) == [f"photo_{k:04d}.jpg" for k in range(6)]
    assert all(len(c) == 5 for c in captions.values())
    with Image.open(tmp_path / "Images" / "photo_0000.jpg") as im:
        assert im.format == "JPEG" and im.size in SIZES


def test_the_photo_pipeline_copy_runs_the_caption_task_alone(tmp_path):
    """benchmarks/photo_pipeline.py's copy of the project: the caption task on the drawn photos,
    quick, seed 0, no study."""
    import yaml

    from benchmarks.photo_pipeline import caption_copy

    settings = caption_copy(tmp_path / "project", tmp_path / "photos", 448, 3)
    params = yaml.safe_load((tmp_path / "project" / "params.yaml").read_text())
    assert (params["tasks"], params["profile"], params["seeds"]) == (["caption"], "quick", [0])
    assert params["translate"]["families"] == params["classify"]["pretrained"] == []
    caption = params["caption"]
    assert caption["data"] == {
        "source": "image_captions",
        "path": str(tmp_path / "photos"),
        "image_size": 448,
    }
    assert (
        caption["tune"]["trials"] == 0
        and caption["train"]["max_epochs"] == settings["train"]["max_epochs"] == 3
    )
    assert (
        settings["families"] == caption["families"]
        and (tmp_path / "project" / "dvc.yaml").is_file()
    )


def test_pipeline_cost_adds_up_each_stage_of_a_repro_log(tmp_path):
    """benchmarks/pipeline_cost.py: a stage runs from DVC's "Running stage" to its chain's last line
    (past midnight too), a stage DVC did not record counts as stopped, the stages it skipped are
    kept per log, and a log with no stage is refused by name."""
    from benchmarks import pipeline_cost

    log = tmp_path / "caption.log"
    lines = [
        "23:50:00 [shared] Running stage 'prepare_caption':",
        "23:50:30 [shared] Updating lock file 'dvc.lock'",
        (
            "23:50:40 [tune_caption@show_attend_tell] Stage 'tune_caption@show_attend_tell' didn't"
            " change, skipping"
        ),
        "23:51:00 [tune_caption@show_tell] Running stage 'tune_caption@show_tell':",
        "23:55:00 [train_caption@show_attend_tell] Running stage 'train_caption@show_attend_tell':",
        "not a line of the repro log",
        "00:01:00 [tune_caption@show_tell] Updating lock file 'dvc.lock'",
        "00:01:00 [tune_caption@show_tell] Running stage 'train_caption@show_tell':",
        (
            "00:03:00 [train_caption@show_attend_tell] tune show_attend_tell seed 0: epoch 1/40"
            " val/loss 2.36"
        ),
        "00:11:00 [tune_caption@show_tell] Updating lock file 'dvc.lock'",
    ]
    log.write_text("".join(f"{line}\n" for line in lines))
    os.utime(log, (1_000_000.0, 1_000_000.0))  # its last line's time: its span ends there
    out = tmp_path / "cost"
    assert pipeline_cost.main([str(log), "--out", str(out), "--no-floor"]) == 0
    summary = json.loads(out.with_suffix(".json").read_text())
    caption = summary["tasks"]["caption"]
    assert summary["logs"] == {"caption.log": 21 * 60.0}
    assert summary["spans"] == {"caption.log": [1_000_000.0 - 21 * 60, 1_000_000.0]}
    assert caption["families"] == {
        "(shared stages)": 30.0,
        "show_tell": 20 * 60.0,
        "show_attend_tell": 8 * 60.0,
    }
    assert (caption["stages"], caption["stopped"]) == (3, 1)
    assert summary["skipped"] == {"caption.log": ["tune_caption@show_attend_tell"]}
    assert "| caption | 28.5 | 3 | 1 |" in out.with_suffix(".md").read_text()

    # a later piece of the run adds to the earlier one's figures
    second = tmp_path / "translate.log"
    second.write_text(
        "10:00:00 [shared] Running stage 'prepare_translate':\n10:02:00 [shared] Updating lock"
        " file\n"
    )
    pipeline_cost.main([str(second), "--out", str(out), "--no-floor"])
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["logs"] == {"caption.log": 21 * 60.0, "translate.log": 120.0}
    assert (
        summary["tasks"]["caption"]["seconds"] == 28.5 * 60
        and summary["tasks"]["translate"]["stages"] == 1
    )
    pipeline_cost.main([str(second), "--out", str(out), "--fresh", "--no-floor"])
    assert list(json.loads(out.with_suffix(".json").read_text())["tasks"]) == ["translate"]

    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    with pytest.raises(SystemExit):
        pipeline_cost.main([str(empty), "--out", str(out), "--no-floor"])


def test_the_photo_pipeline_section_states_the_vocabulary_s_coverage():
    """The section says how much of the test references the vocabulary covers (issue 39), where the
    run measured it."""
    from benchmarks.photo_pipeline import render

    committed = json.loads((ROOT / "reports" / "benchmarks.json").read_text())["photo_pipeline"]
    # a run from before the figure
    before = {key: value for key, value in committed.items() if key != "coverage"}
    assert not any("Vocabulary coverage" in line for line in render(before))
    covered = {
        **before,
        "coverage": {"show_tell": {"test/vocab_coverage": 0.97, "test/references_in_vocab": 0.8}},
    }
    assert (
        "Vocabulary coverage of the test references: 97.0% of their words are in the tokenizer's"
        " vocabulary, and 80.0% of the reference captions" in "\n".join(render(covered))
    )


def test_a_report_quotes_a_command_a_clone_can_run(monkeypatch):
    """benchmarks/common.command: a path inside the repository relative to its root (a relative one
    typed elsewhere too), any other a placeholder named after its option, other words quoted."""
    from benchmarks.common import command

    speed, report = ROOT / "benchmarks" / "speed.py", str(ROOT / "reports" / "x.md")
    argv = [
        "--models",
        "/srv/run/models",
        "--data=/srv/run/data",
        "--out",
        report,
        "--work",
        "/tmp/w",
        "--families",
        "a,b",
        "--stop-rule",
        '{"start": 5}',
        "--quick",
    ]
    assert command(speed, argv) == (
        "python benchmarks/speed.py --models <models folder> --data=<data folder> "
        "--out reports/x.md --work <scratch folder> --families a,b --stop-rule '{\"start\": 5}' "
        "--quick"
    )
    assert command(ROOT / "benchmarks" / "gpu.py", ["--out", "/srv/r.md", "--venv", "/srv/.v"]) == (
        "python benchmarks/gpu.py --out <output file> --venv <venv folder>"
    )
    monkeypatch.chdir(ROOT / "benchmarks")
    assert command(speed, ["--out", "../reports", "--sections", "flops"]) == (
        "python benchmarks/speed.py --out reports --sections flops"
    )


def test_the_committed_reports_quote_no_machine_s_path():
    """Every `python benchmarks/...` command the committed reports quote runs in any clone: no
    absolute path."""
    for name in ("benchmarks.md", "benchmarks.json", "serving.md", "cost.md", "cost.json"):
        text = (ROOT / "reports" / name).read_text(encoding="utf-8")
        for quoted in re.findall(r"python benchmarks/[^`\"\n]*", text):
            assert not re.search(r"(^|[\s=])[/~]", quoted), f"reports/{name}: {quoted}"
