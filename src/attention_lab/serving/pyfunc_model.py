"""The file MLflow runs to load a model that `attention-lab register` logged (models from code)."""

from mlflow.models import set_model

from attention_lab.serving.mlflow_models import ExportedModel

set_model(ExportedModel())
