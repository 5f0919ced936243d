"""decoder_step.py: every decoder-step family (translation and captioning) keeps the contract, and
the torch adapter leaves a model in the mode it found it in (the search itself:
tests/translate/test_search.py)."""

import pytest
import torch

from attention_lab.nn.decoder_step import DecoderStep, evaluating
from tests.tiny_models import CAPTION, TRANSLATE, tiny_model


@pytest.mark.parametrize("family", [*TRANSLATE, *CAPTION])
def test_every_decoder_step_family_keeps_the_contract(family):
    assert isinstance(tiny_model(family, 30), DecoderStep)


@pytest.mark.parametrize("training", [True, False])
def test_evaluating_restores_the_mode_also_after_an_error(training):
    model = torch.nn.Linear(2, 2).train(training)
    with pytest.raises(RuntimeError), evaluating(model):
        assert not model.training
        raise RuntimeError("inside")
    assert model.training == training
