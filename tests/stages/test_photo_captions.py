"""Photos in Flickr8k's layout through the real stages: prepare (frozen EfficientNet-Lite0
annotations, cached once), tokenize, train and evaluate show_attend_tell (BLEU-1..4 against every
reference)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from attention_lab.core.files import read_json, read_jsonl
from attention_lab.core.readers import DataError
from attention_lab.results import records
from attention_lab.stages import evaluate, prepare, tokenizer, train
from tests.caption.photo_set import write_photo_set
from tests.tiny_models import stage_overrides

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

OUT = Path("data/prepared/caption")


def use_photos(project: Path, **data) -> list[str]:
    names = write_photo_set(project / "corpora" / "shapes")
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["caption"]["data"] = {
        "source": "image_captions",
        "path": "corpora/shapes",
        "valid_fraction": 0.2,
        "test_fraction": 0.2,
        **data,
    }
    params["caption"]["tokenize"] = {"vocab_size": 100, "min_frequency": 1}
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    return names


SIZES = {
    "show_attend_tell": stage_overrides("show_attend_tell"),
    "show_tell": ["model.hidden_dim=16", "model.emb_dim=8"],
}


@pytest.mark.parametrize("family", ["show_attend_tell", "show_tell"])
def test_photos_prepare_train_evaluate(project, one_torch_thread, family):
    """show_attend_tell attends over the 49 annotations; show_tell reads their mean (the pooled
    image vector)."""
    names = use_photos(project)
    prepare.main(["task=caption"])
    rows = {s: read_jsonl(OUT / f"{s}.jsonl") for s in ("train", "valid", "test")}
    assert sorted(r["image"] for part in rows.values() for r in part) == sorted(names)
    features = np.load(OUT / "train.npy")
    assert features.shape == (len(rows["train"]), 49, 1280) and features.dtype == np.float16
    # (3 + 5 + 6) / 3
    assert read_json(OUT / "stats.json")["train"] == {
        "photos": 10,
        "captions": 30,
        "words_mean": 4.67,
    }
    tokenizer.main(["task=caption"])
    small = [
        "task=caption",
        f"family={family}",
        *SIZES[family],
        "train.max_epochs=2",
        "train.batch_size=8",
    ]
    train.main(small)
    evaluate.main(small)
    metrics = records.read_at(Path.cwd(), "caption", family)
    assert all(0 <= metrics[f"test/bleu_{n}"] <= 100 for n in range(1, 5))
    assert metrics["test/bleu"] == metrics["test/bleu_4"] and "test/localisation" not in metrics
    # the tokenizer's coverage of the test references: the evaluate stage's, the same for every seed
    assert 0 < metrics["test/vocab_coverage"] <= 1 and 0 <= metrics["test/references_in_vocab"] <= 1
    assert {s["test/vocab_coverage"] for s in metrics["per_seed"].values()} == {
        metrics["test/vocab_coverage"]
    }
    overlays = list(Path(f"plots/caption/{family}").glob("overlay_*.png"))
    assert len(overlays) == (1 if family == "show_attend_tell" else 0)  # the tiny profile draws one


def test_a_missing_photo_stops_prepare_and_writes_nothing(project):
    use_photos(project)
    (project / "corpora/shapes/Images/circle_red_1.png").unlink()
    with pytest.raises(
        DataError,
        match=r"Images: 1 image\(s\) named in captions.txt not found, e.g. circle_red_1.png",
    ):
        prepare.main(["task=caption"])
    assert not OUT.exists()


def test_image_size_448_caches_the_papers_14x14_grid(project, one_torch_thread):
    """data.image_size=448: photos squashed to 448×448, a 14×14 grid of annotations (L = 196, Xu et
    al. 2015's), and the models composed for it."""
    from attention_lab.core.config import load_config

    use_photos(project, image_size=448)
    prepare.main(["task=caption"])
    rows = read_jsonl(OUT / "train.jsonl")
    features = np.load(OUT / "train.npy")
    assert features.shape == (len(rows), 196, 1280) and features.dtype == np.float16
    cfg = load_config([], family="show_attend_tell", task="caption")
    assert (cfg.model.height, cfg.model.width) == (448, 448)


def test_an_image_size_off_the_stride_is_refused(project):
    from attention_lab.core.config import ConfigError

    use_photos(project, image_size=400)
    with pytest.raises(ConfigError, match="data.image_size=400: must be a multiple of 32"):
        prepare.main(["task=caption"])
    assert not OUT.exists()
