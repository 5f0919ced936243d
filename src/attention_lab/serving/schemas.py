"""Pydantic request and response models of the HTTP service (they are its OpenAPI schema)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_BEAM = 16


class Request(BaseModel):
    """Common to every task: which model, and the text it reads."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="a name from GET /models", examples=["bahdanau"])
    text: str = Field(
        min_length=1, description="the input text (at most the server's --max-chars characters)"
    )

    @field_validator("text")
    @classmethod
    def not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("text is empty (only whitespace)")
        return text


class TranslateRequest(Request):
    text: str = Field(
        min_length=1, description="an English sentence", examples=["the cat sat on the mat"]
    )
    beam: int | None = Field(
        None, ge=1, le=MAX_BEAM, description="beam size, 1 = greedy (default: the export's)"
    )
    len_penalty: float | None = Field(
        None,
        ge=0.0,
        le=5.0,
        allow_inf_nan=False,
        description="GNMT length penalty alpha (beam > 1)",
    )


class TranslateResponse(BaseModel):
    model: str
    family: str
    source: str = Field(description="the sentence as read (whitespace collapsed)")
    source_words: list[str]
    tokens: list[str] = Field(description="target subword tokens, no bos/eos")
    token_ids: list[int]
    translation: str
    attention: list[list[float]] = Field(
        description=(
            "cross-attention, (len(source_words), len(tokens)): column j is token j's weights over"
            " the words"
        )
    )
    has_attention: bool = Field(
        description="false for families without attention (the matrix is then all zeros)"
    )
    score: float = Field(
        description="the hypothesis' search score (length-penalised log-probability)"
    )
    beam: int
    latency_ms: float = Field(description="server time for tokenizing, encoding and searching")


class ClassifyRequest(Request):
    text: str = Field(
        min_length=1,
        description="a document: sentences split by rule, every line break ends one",
        examples=["The room was lovely. The staff, however, was not helpful at all."],
    )


class ClassifyResponse(BaseModel):
    model: str
    family: str
    label: str
    probabilities: dict[str, float]
    sentences: list[list[str]] = Field(
        description="the words the model read, per sentence (after truncation)"
    )
    sentence_weights: list[float] | None = Field(
        description="attention per sentence; null when the family has none"
    )
    word_weights: list[list[float]] | None = Field(
        description="attention per word of each sentence; null if none"
    )
    has_attention: bool
    latency_ms: float


class CaptionResponse(BaseModel):
    model: str
    family: str
    caption: str = Field(description="the caption (its words joined)")
    words: list[str] = Field(description="the caption's tokens, no bos/eos")
    attention: list[list[list[float]]] = Field(
        description=(
            "(len(words), h, w): word t's attention over the encoder's h × w grid of image regions"
        )
    )
    grid: list[int] = Field(
        description="[h, w], the encoder's grid over the canvas or the (squashed) photo"
    )
    has_attention: bool = Field(
        description="false for families without attention (the grids are then all zeros)"
    )
    score: float = Field(
        description="the hypothesis' search score (length-penalised log-probability)"
    )
    beam: int
    overlay: str = Field(
        description=(
            "data:image/png;base64 URL: one panel per word, its attention in red over the image"
        )
    )
    latency_ms: float = Field(
        description="server time for decoding the image, captioning and drawing the overlay"
    )


class TensorInfo(BaseModel):
    name: str
    type: str
    shape: list[int | str | None]


class GraphInfo(BaseModel):
    file: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]


class ModelInfo(BaseModel):
    name: str
    task: str
    family: str
    source: str = Field(description='"folder", or the MLflow model URI it was fetched from')
    path: str
    input: str
    output: str
    graphs: list[GraphInfo]
    files: dict[str, str] = Field(
        description="file name -> sha256 of every file in the exported folder"
    )
    labels: list[str] | None
    has_attention: bool
    image_input: str | None = Field(
        None,
        description='caption models: "photo" (JPEG or PNG of any size, squashed to '
        'the encoder\'s input) or "canvas" (a PNG of exactly the canvas size); else null',
    )


class Skipped(BaseModel):
    path: str
    reason: str


class Health(BaseModel):
    status: str
    models: int
    tasks: list[str]
    skipped: list[Skipped]


class ErrorMessage(BaseModel):
    detail: str
