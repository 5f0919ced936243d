"""Exported folders in the MLflow model registry: logged as an onnx-flavoured model whose extra files are the folder's
files byte for byte, and fetched back into a folder that registry.load_model serves (hashes unchanged).

Needs MLFLOW_TRACKING_URI (or a tracking_uri) pointing at a database or server: sqlite:///… or http://…
"""

from __future__ import annotations

from pathlib import Path

from attention_lab.infer.runtime import ENCODER_FILE, META_FILE, read_meta
from attention_lab.serving.registry import task_of

PRIMARY_GRAPH = {"translate": ENCODER_FILE, "classify": "model.onnx"}   # the graph the onnx flavour itself holds
EXTRA_FILES = "extra_files"
EXPERIMENT = "registry"


def experiment_id(mlflow) -> str:
    """The "registry" experiment; for a sqlite store its artifacts go beside the database (mlartifacts/registry)."""
    found = mlflow.get_experiment_by_name(EXPERIMENT)
    if found is not None:
        return found.experiment_id
    uri = mlflow.get_tracking_uri()
    local = uri.startswith("sqlite:///")
    location = (Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts" / EXPERIMENT).resolve().as_uri() \
        if local else None
    return mlflow.create_experiment(EXPERIMENT, artifact_location=location)


def primary_graph(folder: Path, task: str) -> Path:
    """The graph logged as the onnx flavour's model: the task's main graph, else the first *.onnx."""
    name = PRIMARY_GRAPH.get(task)
    graphs = [folder / name] if name else sorted(folder.glob("*.onnx"))
    if not graphs or not graphs[0].is_file():
        raise ValueError(f"{folder}: no ONNX graph to log")
    return graphs[0]


def log_folder(folder: str | Path, name: str, tracking_uri: str | None = None) -> str:
    """Log an exported folder as a new version of registered model `name`; return the version."""
    import mlflow
    import mlflow.onnx
    import onnx

    folder = Path(folder)
    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    meta = read_meta(folder)
    task = task_of(meta)
    graph = primary_graph(folder, task)
    files = [str(p) for p in sorted(folder.iterdir()) if p.is_file()]
    with mlflow.start_run(experiment_id=experiment_id(mlflow), run_name=f"register-{name}"):
        mlflow.set_tags({"task": task, "family": meta.get("family", name), "stage": "register"})
        info = mlflow.onnx.log_model(onnx.load(str(graph)), name="model", registered_model_name=name,
                                     extra_files=files, metadata={"task": task, "family": meta.get("family"),
                                                                  "primary_graph": graph.name})
    return str(info.registered_model_version)


def fetch_folder(ref: str, dst: str | Path, tracking_uri: str | None = None) -> tuple[str, str, Path]:
    """ref "name[/version]" (default: the latest version) -> (name, models:/ URI, local exported folder)."""
    import mlflow
    import mlflow.artifacts

    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    name, _, version = ref.partition("/")
    if not name:
        raise ValueError(f"registry model {ref!r}: expected name or name/version")
    uri = f"models:/{name}/{version or 'latest'}"
    Path(dst).mkdir(parents=True, exist_ok=True)
    try:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(dst)))
    except mlflow.exceptions.MlflowException as err:
        raise ValueError(f"cannot fetch {uri} from {mlflow.get_tracking_uri()}: {err.message}") from err
    folder = local / EXTRA_FILES
    if not (folder / META_FILE).is_file():
        raise ValueError(f"{uri} is not an attention-lab export (no {EXTRA_FILES}/{META_FILE}; log it with "
                         "`attention-lab register`)")
    return name, uri, folder
