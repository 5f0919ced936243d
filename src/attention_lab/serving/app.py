"""The HTTP service (FastAPI on onnxruntime alone): health, models, translate, classify, caption and
the explorer page at /.

Add a task: a ModelKind in registry.py, its answer in answers.py, an endpoint below that takes
`served(name, task)` and returns its schema, and for the MLflow pyfunc its input column and
answer_rows branch in mlflow_models.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, File, Form, HTTPException, Request, UploadFile
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from attention_lab.caption.serve import ImageError
from attention_lab.serving import answers
from attention_lab.serving.registry import KINDS, LoadedModel
from attention_lab.serving.schemas import (
    MAX_BEAM,
    CaptionResponse,
    ClassifyRequest,
    ClassifyResponse,
    ErrorMessage,
    Health,
    ModelInfo,
    TranslateRequest,
    TranslateResponse,
)

STATIC = Path(__file__).parent / "static"
ERRORS = {
    404: {"model": ErrorMessage, "description": "unknown model"},
    413: {"model": ErrorMessage, "description": "request body over the size limit"},
    422: {
        "description": (
            "malformed JSON, wrong types, empty or too long text, or a model of another task"
        )
    },
}
CAPTION_ERRORS = {
    **ERRORS,
    422: {
        "description": "a missing field; an empty, unreadable or truncated image; a photo "
        "over the pixel cap; a canvas not of the model's size; or a model of another task"
    },
}
IMAGE_PATHS = ("/caption",)  # body limit ServeSettings.max_image_bytes (a photo upload)


@dataclass(frozen=True)
class ServeSettings:
    """Limits on what a request may ask for."""

    max_chars: int = 5000  # characters of text per request
    max_body_bytes: int = 65536  # bytes of request body
    max_image_bytes: int = 16 << 20  # bytes of request body of POST /caption (a photo upload)


class App(FastAPI):
    """FastAPI whose 413 (the body limit's "Content Too Large") names the limit and its option."""

    def build_middleware_stack(self) -> ASGIApp:
        app = super().build_middleware_stack()

        async def our_413(scope: Scope, receive: Receive, send: Send) -> None:
            replaced = False

            async def send_ours(message: Message) -> None:
                nonlocal replaced
                if message["type"] == "http.response.start" and message["status"] == 413:
                    option = "--max-image-body" if scope["path"] in IMAGE_PATHS else "--max-body"
                    detail = (
                        f"request body is over this server's limit of "
                        f"{scope[MAX_BODY_SIZE_SCOPE_KEY]} bytes ({option})"
                    )
                    await JSONResponse({"detail": detail}, 413)(scope, receive, send)
                    replaced = True
                elif not replaced:  # the library's own body of the 413 is dropped
                    await send(message)

            await app(scope, receive, send_ours)

        return our_413


class Utf8Route(APIRoute):
    """A route answering 400 to a bad Content-Length, 422 to a JSON body not in UTF-8 (RFC 8259)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            if not request.headers.get("content-length", "0").isdigit():
                raise HTTPException(400, "bad Content-Length header")
            if "json" in request.headers.get("content-type", ""):
                body = await request.body()  # under the body limit: over it, the library's 413
                try:
                    body.decode("utf-8")
                except UnicodeDecodeError as err:
                    detail = (
                        f"request body is not UTF-8: byte 0x{body[err.start]:02x} at offset "
                        f"{err.start} ({err.reason}); send JSON encoded as UTF-8"
                    )
                    raise HTTPException(422, detail) from err
            return await handler(request)

        return checked


class AsciiJSONResponse(JSONResponse):
    """JSON with non-ASCII characters escaped, so a 422 that echoes a lone surrogate of the request
    still encodes."""

    def render(self, content) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode("ascii")


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 for a request that fails its schema, rendered with AsciiJSONResponse."""
    return AsciiJSONResponse({"detail": jsonable_encoder(exc.errors())}, 422)


def create_app(
    models: dict[str, LoadedModel],
    settings: ServeSettings | None = None,
    skipped: list[dict] | None = None,
) -> FastAPI:
    """The app serving `models` (by name) under `settings`."""
    settings = settings or ServeSettings()
    app = App(
        title="attention-lab",
        version="0.1.0",
        description=(
            "Attention models for NLP on onnxruntime: translation with its cross-attention,"
            " document classification with word and sentence attention, image captioning with"
            " attention over image regions. The attention explorer page is at /."
        ),
        max_body_size=settings.max_body_bytes,
    )
    app.router.route_class = Utf8Route
    app.add_exception_handler(RequestValidationError, validation_error)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def served(name: str, task: str, text: str = "") -> LoadedModel:
        """The model `name` for `task`, after the text length check; 404 / 422 otherwise."""
        if name not in models:
            raise HTTPException(
                404, f"unknown model {name!r}; served: {', '.join(sorted(models)) or 'none'}"
            )
        model = models[name]
        if model.task != task:
            raise HTTPException(
                422, f"model {name!r} is a {model.task} model; use POST /{model.task}"
            )
        if len(text) > settings.max_chars:
            raise HTTPException(
                422,
                f"text has {len(text)} characters; this server accepts at most "
                f"{settings.max_chars} (--max-chars)",
            )
        return model

    @app.get("/", include_in_schema=False)
    def explorer() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/health", response_model=Health, summary="liveness and what is served")
    def health() -> dict:
        return {
            "status": "ok",
            "models": len(models),
            "tasks": sorted({m.task for m in models.values()}),
            "skipped": skipped or [],
        }

    @app.get(
        "/models",
        response_model=list[ModelInfo],
        summary="every served model: task, I/O, file hashes",
    )
    def list_models() -> list[dict]:
        return [models[name].info() for name in sorted(models)]

    @app.post(
        "/translate",
        response_model=TranslateResponse,
        responses=ERRORS,
        summary="translate a sentence; tokens, translation and cross-attention",
    )
    def translate(req: TranslateRequest) -> dict:
        model = served(req.model, "translate", req.text)
        start = time.perf_counter()
        answer = answers.translate(model, req.text, req.beam, req.len_penalty)
        return {**answer, "latency_ms": round((time.perf_counter() - start) * 1000, 3)}

    @app.post(
        "/classify",
        response_model=ClassifyResponse,
        responses=ERRORS,
        summary="classify a document; label, probabilities, word and sentence attention",
    )
    def classify(req: ClassifyRequest) -> dict:
        model = served(req.model, "classify", req.text)
        start = time.perf_counter()
        try:
            answer = answers.classify(model, req.text)
        except ValueError as err:  # e.g. a document without words
            raise HTTPException(422, str(err)) from err
        return {**answer, "latency_ms": round((time.perf_counter() - start) * 1000, 3)}

    @app.post(
        "/caption",
        response_model=CaptionResponse,
        responses=CAPTION_ERRORS,
        max_body_size=settings.max_image_bytes,
        summary="caption a photo or canvas; words, attention grid per word and an overlay PNG",
    )
    def caption(
        image: Annotated[
            UploadFile,
            File(
                description="a photo model: a JPEG or PNG photo of any size; a "
                "canvas model: a grayscale PNG of its canvas size, ink bright on dark"
            ),
        ],
        model: Annotated[
            str, Form(min_length=1, description="a caption model's name from GET /models")
        ],
        beam: Annotated[
            int | None,
            Form(ge=1, le=MAX_BEAM, description="beam size, 1 = greedy (default: the export's)"),
        ] = None,
    ) -> dict:
        served_model = served(model, "caption")
        data = image.file.read()
        start = time.perf_counter()
        try:
            name = image.filename or "the uploaded image"
            answer = answers.caption(served_model, data, name, beam)
        except ImageError as err:
            raise HTTPException(422, str(err)) from err
        return {**answer, "latency_ms": round((time.perf_counter() - start) * 1000, 3)}

    app.state.models, app.state.settings, app.state.kinds = models, settings, sorted(KINDS)
    return app
