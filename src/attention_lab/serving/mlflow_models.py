"""Exported folders in the MLflow model registry as pyfunc models that serve themselves.

`mlflow models serve -m models:/<name>/<version>` answers as `attention-lab serve` does (answers.py,
onnxruntime, never torch); `serve --registry-model` fetches the folder back byte for byte. The
pyfunc reads one input per row of column INPUT[task] (text, or an image file's bytes: base64 in
JSON), params beam (and len_penalty) defaulting to the export's, and answers a list: per row
`serve`'s JSON without latency_ms, "model" being the registered name. Needs MLFLOW_TRACKING_URI
(or a tracking_uri): a database or a server, sqlite:///… or http://…
"""

from __future__ import annotations

import base64
import io
import warnings
from pathlib import Path

import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.pyfunc import PythonModel
from PIL import Image

from attention_lab.infer.runtime import META_FILE
from attention_lab.serving import answers
from attention_lab.serving.registry import LoadedModel, load_model
from attention_lab.serving.schemas import MAX_BEAM

EXPORT = "export"  # the pyfunc's artifact: the exported folder
CODE = Path(__file__).with_name("pyfunc_model.py")  # the file MLflow loads it with (from code)
INPUT = {"translate": "text", "classify": "text", "caption": "image"}
EXAMPLE_TEXT = {
    "translate": "the cat sat on the mat",
    "classify": "The room was lovely. The staff, however, was not helpful at all.",
}
EXPERIMENT = "registry"


class ExportedModel(PythonModel):
    """An exported folder (the artifact EXPORT) as a pyfunc: inputs -> one answer per row."""

    def load_context(self, context) -> None:
        self.model = load_model(context.artifacts[EXPORT], context.model_config["name"])

    def predict(self, context, model_input: pd.DataFrame, params: dict | None = None) -> list[dict]:
        return answer_rows(self.model, model_input, params or {})


def answer_rows(model: LoadedModel, frame: pd.DataFrame, params: dict) -> list[dict]:
    """answers.<task> of each row; an input it refuses (no words, a bad image) is a 400."""
    inputs = frame[INPUT[model.task]]  # there: MLflow checks the input against the signature first
    beam = params.get("beam")
    if beam is not None and not 1 <= beam <= MAX_BEAM:
        raise MlflowException.invalid_parameter_value(
            f"beam must be in [1, {MAX_BEAM}], got {beam}"
        )
    try:
        if model.task == "translate":
            len_penalty = params.get("len_penalty")
            return [answers.translate(model, text, beam, len_penalty) for text in inputs]
        if model.task == "classify":
            return [answers.classify(model, text) for text in inputs]
        return [
            answers.caption(model, image_file(image), f"image {row}", beam)
            for row, image in enumerate(inputs)
        ]
    except ValueError as err:
        raise MlflowException.invalid_parameter_value(str(err)) from err


def image_file(value: bytes) -> bytes:
    """An image file's bytes: the "inputs" JSON format leaves a binary column base64 text."""
    try:
        return base64.b64decode(b"".join(value.split()), validate=True)
    except ValueError:  # not base64 (a PNG or JPEG never is): the file itself
        return value


def input_example(model: LoadedModel) -> pd.DataFrame:
    """One input: a sentence, a document, or a black PNG of the captioner's input size."""
    if model.task != "caption":
        return pd.DataFrame({INPUT[model.task]: [EXAMPLE_TEXT[model.task]]})
    buf = io.BytesIO()
    size = (model.meta["width"], model.meta["height"])
    Image.new("RGB" if model.runner.photo else "L", size).save(buf, format="PNG")
    return pd.DataFrame({INPUT["caption"]: [buf.getvalue()]})


def experiment_id(mlflow) -> str:
    """The "registry" experiment; a sqlite store's artifacts go beside it (mlartifacts/registry)."""
    found = mlflow.get_experiment_by_name(EXPERIMENT)
    if found is not None:
        return found.experiment_id
    uri = mlflow.get_tracking_uri()
    database = Path(uri.removeprefix("sqlite:///"))
    location = (
        (database.parent / "mlartifacts" / EXPERIMENT).resolve().as_uri()
        if uri.startswith("sqlite:///")
        else None
    )
    return mlflow.create_experiment(EXPERIMENT, artifact_location=location)


def log_folder(folder: str | Path, name: str, tracking_uri: str | None = None) -> str:
    """Log an exported folder as a new version of registered pyfunc `name`; return the version."""
    import mlflow
    from mlflow.models import infer_signature

    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    model = load_model(folder, name)  # a broken folder fails here, before anything is logged
    example = input_example(model)
    with warnings.catch_warnings():  # a hint on integer inputs (ours are outputs) left out
        warnings.filterwarnings("ignore", "Hint: Inferred schema contains integer", UserWarning)
        signature = infer_signature(
            example, answer_rows(model, example, {}), answers.search_defaults(model) or None
        )
    with mlflow.start_run(experiment_id=experiment_id(mlflow), run_name=f"register-{name}"):
        mlflow.set_tags({"task": model.task, "family": model.family, "stage": "register"})
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=str(CODE),
            artifacts={EXPORT: str(model.path)},
            model_config={"name": name},
            signature=signature,
            input_example=example,
            registered_model_name=name,
            metadata={"task": model.task, "family": model.family},
        )
    return str(info.registered_model_version)


def fetch_folder(
    ref: str, dst: str | Path, tracking_uri: str | None = None
) -> tuple[str, str, Path]:
    """ref "name[/version]" (default: the latest) -> (name, models:/ URI, local exported folder)."""
    import mlflow
    import mlflow.artifacts
    from mlflow.models import Model

    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    name, _, version = ref.partition("/")
    if not name:
        raise ValueError(f"registry model {ref!r}: expected name or name/version")
    uri = f"models:/{name}/{version or 'latest'}"
    Path(dst).mkdir(parents=True, exist_ok=True)
    try:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(dst)))
    except MlflowException as err:
        raise ValueError(
            f"cannot fetch {uri} from {mlflow.get_tracking_uri()}: {err.message}"
        ) from err
    pyfunc = Model.load(str(local)).flavors.get("python_function", {})
    folder = local / pyfunc.get("artifacts", {}).get(EXPORT, {}).get("path", EXPORT)
    if not (folder / META_FILE).is_file():
        raise ValueError(
            f"{uri} is not an attention-lab export (no artifact {EXPORT!r} with a "
            f"{META_FILE}; log it with `attention-lab register`)"
        )
    return name, uri, folder
