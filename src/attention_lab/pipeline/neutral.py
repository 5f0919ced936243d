"""`attention-lab neutral`: prove a change result-neutral, then record its code deps in dvc.lock
without a re-run. The proof trains the families whose stages the change stales (all of them for a
change to shared code) on the tiny profile (two seeds; label fractions, pretraining and a tuning
trial as the pipeline runs them) at a base commit and at the working tree, and compares every
checkpoint's state dict, every metric and prediction bit for bit, and each such family's resolved
quick-profile config (docs/pipeline.md, "A refactor that re-runs nothing"); lock.py records it."""

from __future__ import annotations

import concurrent.futures
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from attention_lab.core.params import ABLATION_KEYS, families, pretrained_families
from attention_lab.core.paths import DATA, METRICS, MODELS, PREDICTIONS, RESULTS, TUNED_DIR
from attention_lab.pipeline.lock import finish, snapshot, stale
from attention_lab.pipeline.scratch import copy_project, drop_orphans, environ

SEEDS = [0, 1]
# what differs between two identical runs: timings, MLflow run ids, and the keys that name the code
# (run keys, study names: the proof's two trees are two codes); and the CPUs that trained a run,
# which both trees share but an older base does not record
VOLATILE = re.compile(r"seconds|_per_s$|^date$|^created$|duration|^machines?$|^cpu$|^run_id$|^key$")
# what the stages up to evaluate write
OUTPUTS = (DATA, MODELS, TUNED_DIR, METRICS, RESULTS, PREDICTIONS)
GIT_ID = {
    "GIT_AUTHOR_NAME": "neutral",
    "GIT_AUTHOR_EMAIL": "neutral@localhost",
    "GIT_COMMITTER_NAME": "neutral",
    "GIT_COMMITTER_EMAIL": "neutral@localhost",
}
CODE_HASH = """
import json, sys
from omegaconf import OmegaConf
from attention_lab.core import tracking
root, stages, hash_of = sys.argv[1], json.loads(sys.argv[2]), getattr(tracking, sys.argv[3])
def config(task, family, pretrained):
    return OmegaConf.create({"root": root, "task": {"name": task}, "family": family,
                             "pretrained": pretrained})
print(json.dumps({k: hash_of(config(t, f, p), s) for k, (t, f, p, s) in stages.items()}))
"""  # run by each tree's own code: the base's hashes are what its studies and runs were named with


@dataclass
class Tree:
    """One side of the proof: the files it was copied from and the scratch copies it runs in."""

    name: str
    source: Path
    work: Path
    log: Path = field(init=False)

    def __post_init__(self):
        self.log = self.work.parent / f"{self.name}.log"

    def sh(self, args: list[str], cwd: Path) -> str:
        """Run `args` in `cwd`, stderr to the log; its stdout, a progress line per DVC stage it
        starts."""
        env = environ(
            cwd,
            **GIT_ID,
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            OPENBLAS_NUM_THREADS="1",
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        )
        start, out = time.monotonic(), []
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"$ {' '.join(args)}  (in {cwd})\n")
            log.flush()
            with subprocess.Popen(
                args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=log, text=True
            ) as proc:
                for line in proc.stdout:
                    out.append(line)
                    if stage := re.match(r"Running stage '(.+)':", line):
                        minutes = (time.monotonic() - start) / 60
                        print(f"  {self.name}, {minutes:4.1f} min: {stage[1]}", flush=True)
            log.write("".join(out)[-20000:])
        if proc.returncode:
            raise SystemExit(
                f"{self.name}: `{' '.join(args)}` failed ({proc.returncode}); see {self.log}"
            )
        return "".join(out)


def families_of(params: dict) -> list[tuple[str, str, bool]]:
    """(task, family, pretrained) for every family of every task of params.yaml `tasks`."""
    return [
        (task, family, family in pretrained_families(params, task))
        for task in params["tasks"]
        for family in families(params, task)
    ]


def only(chosen: list[str] | None):
    """A params.yaml edit: only the `chosen` families (all where None), and no replication (its runs
    are the same families' on other seeds: nothing more to prove)."""

    def edit(params: dict) -> None:
        for task in params["tasks"]:
            params[task]["replication"] = {}
            for key in ("families", "pretrained") if chosen else ():
                params[task][key] = [f for f in params[task].get(key) or [] if f in chosen]
        drop_orphans(params)  # every ablation has stages: those of families left out go
        params["tasks"] = [
            t for t in params["tasks"] if params[t].get("families") or params[t].get("pretrained")
        ]

    return edit


def extract(root: Path, rev: str, dest: Path) -> Path:
    """The files of commit `rev` of the git checkout `root`, in `dest`."""
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", rev], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def uncapped(profile):
    """The profile with every `max_minutes` lifted: runs bounded by epochs and updates alone (a
    clock cap would end them anywhere)."""
    if isinstance(profile, dict):
        return {k: 10_000.0 if k == "max_minutes" else uncapped(v) for k, v in profile.items()}
    return profile


def train(tree: Tree, chosen: list[str] | None) -> Path:
    """The tiny pipeline up to every evaluation, in a scratch copy of the tree."""
    copy_project(tree.work, root=tree.source, profile="tiny", seeds=SEEDS, edit=only(chosen))
    tiny = tree.work / "conf" / "profile" / "tiny.yaml"
    tiny.write_text(
        yaml.safe_dump(uncapped(yaml.safe_load(tiny.read_text(encoding="utf-8"))), sort_keys=False),
        encoding="utf-8",
    )
    for args in (
        ["git", "init", "-q"],
        ["dvc", "init", "-q"],
        ["dvc", "config", "core.analytics", "false"],
        ["attention-lab", "stages"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", tree.name],
    ):
        tree.sh(args, tree.work)
    groups = sorted(yaml.safe_load((tree.work / "dvc.yaml").read_text(encoding="utf-8"))["stages"])
    tree.sh(["dvc", "repro", *[g for g in groups if g.startswith("evaluate")]], tree.work)
    return tree.work


def configs(tree: Tree, dest: Path, stages: list[tuple[str, str, bool]]) -> dict[str, str]:
    """Every family's resolved quick-profile config (`attention-lab config`), its root path written
    as <root>."""
    copy_project(dest, root=tree.source, tuned=True)
    return {
        f"{t}/{f}": tree.sh(["attention-lab", "config", f"task={t}", f"family={f}"], dest).replace(
            str(dest), "<root>"
        )
        for t, f, _ in stages
    }


def code_hashes(
    tree: Tree, stages: list[tuple[str, str, bool]], hash_of: str = "code_hash"
) -> dict[str, str]:
    """{task/family/stage: the tree's code hash (core.tracking's `hash_of`)} for the stages whose
    code names studies and runs (train, pretrain)."""
    wanted = {
        f"{t}/{f}/{s}": (t, f, p, s)
        for t, f, p in stages
        for s in (("train", "pretrain") if p else ("train",))
    }
    return json.loads(
        tree.sh(
            [sys.executable, "-c", CODE_HASH, str(tree.source), json.dumps(wanted), hash_of],
            tree.source,
        )
    )


def _tensors(named: dict) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, nested dicts included."""
    import torch

    h = hashlib.sha256()
    for key, value in sorted(named.items()):
        if isinstance(value, torch.Tensor):
            h.update(f"{key}:{value.dtype}:{tuple(value.shape)}".encode())
            h.update(value.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, dict):
            h.update(f"{key}:{_tensors(value)}".encode())
    return h.hexdigest()


def _stable(value, root: str, parent: str = ""):
    """JSON or YAML data without its VOLATILE keys (and a study's name), the copy's root written as
    <root>."""
    if isinstance(value, dict):
        return {
            k: _stable(v, root, str(k))
            for k, v in value.items()
            if not VOLATILE.search(str(k)) and not (parent == "study" and k == "name")
        }
    if isinstance(value, list):
        return [_stable(v, root) for v in value]
    return value.replace(root, "<root>") if isinstance(value, str) else value


def fingerprints(work: Path, new_keys: list[str] = ()) -> dict[str, str]:
    """{output file: digest} of what the stages decided: checkpoints' state dicts, pretrained
    encoders, data, metrics, details, predictions, tuned values and run records (their VOLATILE keys
    left out, and in a run's config and a details.json's `trained_config` the `new_keys` the change
    adds: added()); studies' journals, which log times, not."""
    import torch
    from safetensors.torch import load_file

    from attention_lab.train.checkpoints import read_checkpoint

    found: dict[str, str] = {}
    for path in sorted(p for top in OUTPUTS for p in (work / top).rglob("*") if p.is_file()):
        rel = path.relative_to(work).as_posix()
        if path.suffix == ".ckpt":
            ckpt = read_checkpoint(path)
            found[rel] = _tensors(
                {
                    "state_dict": ckpt.get("state_dict", ckpt),
                    "step": torch.tensor(ckpt.get("global_step", -1)),
                }
            )
        elif path.suffix == ".safetensors":
            found[rel] = _tensors(load_file(path))
        elif path.suffix in (".json", ".yaml"):
            text = path.read_text(encoding="utf-8")
            data = _stable(
                json.loads(text) if path.suffix == ".json" else yaml.safe_load(text), str(work)
            )
            for key in new_keys:
                *parents, leaf = key.split(".")
                _holder(data, parents).pop(leaf, None)  # a run's config.yaml
                _holder(data, ["trained_config"]).pop(key, None)  # details.json's settings, dotted
            found[rel] = hashlib.sha256(
                json.dumps(data, sort_keys=True, default=str).encode()
            ).hexdigest()
        elif path.suffix not in (".journal", ".lock"):
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def new_outputs(root: Path, base: str, prints: list[dict[str, str]]) -> dict[str, str]:
    """{output: the name it belongs to} of the tree's outputs that belong to a family, ablation or
    replication entry params.yaml names in the tree and not at the base (a new ablation's runs:
    nothing to compare them with)."""

    def names(params: dict) -> set[str]:
        return {
            n
            for t in params.get("tasks", [])
            for key in ("families", "pretrained", *ABLATION_KEYS)
            for n in (params.get(t) or {}).get(key) or []
        }

    then = yaml.safe_load(
        subprocess.run(
            ["git", "show", f"{base}:params.yaml"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    added = names(yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))) - names(then)
    return {
        k: n
        for k in prints[1].keys() - prints[0].keys()
        for n in added
        if f"/{n}/" in f"/{k}" or k.endswith(f"/{n}.json")
    }


def differences(a: dict[str, str], b: dict[str, str], what: str) -> list[str]:
    return [
        f"{what} {k}:"
        f" {'only at the base' if k not in b else 'only in the tree' if k not in a else 'differs'}"
        for k in sorted(a.keys() | b.keys())
        if a.get(k) != b.get(k)
    ]


def added(
    base: dict[str, str], tree: dict[str, str], keys: list[str]
) -> tuple[dict, dict, list[str], list[str]]:
    """The quick-profile configs of both sides without `keys` (dotted config keys the change adds,
    in the tree's configs and none of the base's, or drops, the other way round: a rename is both),
    what each key is set to, and the keys left out; a key both sides have is compared as any
    other."""
    parse = {
        side: {k: yaml.safe_load(text) for k, text in configs.items()}
        for side, configs in (("base", base), ("tree", tree))
    }
    said, new = [], []
    for key in keys:
        *parents, leaf = key.split(".")
        has = {
            side: any(leaf in _holder(c, parents) for c in configs.values())
            for side, configs in parse.items()
        }
        if has["base"] == has["tree"]:
            said.append(
                f"{key}:"
                f" {'both sides have it (compared)' if has['base'] else 'neither side has it'}"
            )
            continue
        new.append(key)
        side, word = ("tree", "new, set to") if has["tree"] else ("base", "dropped, was")
        values = {
            json.dumps(_holder(c, parents).pop(leaf, "<absent>")) for c in parse[side].values()
        }
        said.append(f"{key}: {word} {', '.join(sorted(values))} (not compared)")
    dump = {
        side: {k: yaml.safe_dump(c, sort_keys=True) for k, c in configs.items()}
        for side, configs in parse.items()
    }
    return dump["base"], dump["tree"], said, new


def _holder(cfg: dict, parents: list[str]) -> dict:
    """The mapping at the dotted path `parents` of a parsed config ({} where there is none)."""
    for part in parents:
        cfg = cfg.get(part) if isinstance(cfg, dict) else None
    return cfg if isinstance(cfg, dict) else {}


def affected(params: dict, stages: list[str]) -> list[str] | None:
    """The families whose tiny pipelines cover the stale stages: a family's stage
    (`<kind>@<family>`; an ablation's, its family), every family of the task for a task-wide stage
    (`prepare_<task>`); None (every family) for a stage of no one task."""
    runs = {f for t in params["tasks"] for f in families(params, t)}
    of = {
        name: e["of"]
        for t in params["tasks"]
        for key in ABLATION_KEYS
        for name, e in ((params[t] or {}).get(key) or {}).items()
    }
    chosen: set[str] = set()
    for name in stages:
        kind, _, item = name.partition("@")
        task = next((t for t in params["tasks"] if kind.endswith(f"_{t}")), None)
        if item and of.get(item, item) in runs:
            chosen.add(of.get(item, item))
        elif not item and task is not None:
            chosen.update(families(params, task))
        else:
            return None
    return sorted(chosen)


def prove(
    root: Path,
    base: str,
    chosen: list[str] | None,
    keep: Path | None,
    do_record: bool,
    new_keys: list[str] = (),
) -> int:
    """The proof against commit `base` (the quick-profile configs compared without `new_keys`,
    config keys the change adds), then, unless `chosen` restricts it or do_record is False, the
    record; 0 when the change is result-neutral, 1 when it is not (nothing recorded)."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        return _prove(root, base, chosen, keep, do_record, list(new_keys))
    with tempfile.TemporaryDirectory(prefix="neutral-") as scratch:
        return _prove(root, base, chosen, Path(scratch), do_record, list(new_keys))


def _prove(
    root: Path,
    base: str,
    chosen: list[str] | None,
    scratch: Path,
    do_record: bool,
    new_keys: list[str],
) -> int:
    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    partial = chosen is not None  # --families: a quick look
    if not partial:
        from attention_lab.pipeline.generated import write

        write(root)  # the stages as the tree's code defines them
        chosen = affected(params, changed := stale(root))
        print(
            f"stages DVC would re-run: {', '.join(changed) or 'none'}; proving "
            f"{'every family' if chosen is None else ', '.join(chosen) or 'no family'}"
        )
    stages = [s for s in families_of(params) if chosen is None or s[1] in chosen]
    if not stages:  # no family to train: the record (of nothing but dvc.yaml) and the reports
        return finish(root, {}, do_record and not partial)
    trees = [
        Tree("base", extract(root, base, scratch / "base-src"), scratch / "base"),
        Tree("tree", root, scratch / "tree"),
    ]
    print(
        f"proving {len(stages)} families, seeds {SEEDS}, base {base} against the working tree (logs"
        f" in {scratch})"
    )
    proved = snapshot(root)
    # the two trees side by side, one core each
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda t: train(t, chosen), trees))
        quick = list(pool.map(lambda t: configs(t, scratch / f"{t.name}-config", stages), trees))
    if new_keys:
        *quick, said, new_keys = added(*quick, new_keys)
        print("config keys the change adds or drops:\n  " + "\n  ".join(said))
    prints = [fingerprints(w, new_keys) for w in runs]
    fresh = new_outputs(root, base, prints)
    if fresh:
        print(
            "new in the tree, nothing at the base to compare with (they run for real later):"
            f" {len(fresh)} outputs of {', '.join(sorted({name for name in fresh.values()}))}"
        )
        prints[1] = {k: v for k, v in prints[1].items() if k not in fresh}
    found = differences(*prints, "output") + differences(*quick, "quick-profile config")
    kinds = {
        k: sum(1 for p in prints[0] if p.startswith(s[0]) and p.endswith(s[1]))
        for k, s in (
            ("checkpoints", ("", ".ckpt")),
            ("encoders", ("", ".safetensors")),
            ("data files", (f"{DATA}/", "")),
            ("metrics", (f"{METRICS}/", ".json")),
            ("details", (f"{RESULTS}/", ".json")),
            ("predictions", (f"{PREDICTIONS}/", ".json")),
        )
    }
    print(
        f"compared: {', '.join(f'{n} {k}' for k, n in kinds.items())}, {len(prints[0])} files in"
        f" all; {len(quick[0])} quick-profile configs"
    )
    if found:
        print("NOT result-neutral:\n  " + "\n  ".join(found))
        return 1
    print(
        "result-neutral: every state dict, metric, prediction and quick-profile config is the same"
        " bit for bit"
    )
    if not do_record or partial:
        print("nothing recorded" + (" (--families proves a part: a quick look)" if partial else ""))
        return 0
    if snapshot(root) != proved:
        print("the working tree changed while the proof ran: nothing recorded; run it again")
        return 1
    old, new = code_hashes(trees[0], stages), code_hashes(trees[1], stages, "raw_code_hash")
    return finish(root, {new[k]: old[k] for k in new if new[k] != old[k]}, True)
