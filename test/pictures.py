"""Checks that a written figure shows something: a PNG of a plausible size that is not blank."""
from __future__ import annotations

import numpy as np


def assert_picture(path, min_width_px: int = 300, min_height_px: int = 200) -> np.ndarray:
    """Assert path is a PNG at least min_width_px x min_height_px whose pixels are not one flat
    colour: at least 1 % differ from the most common (background) colour and there are at least 16
    distinct colours (lines, text, fills). Returns the image, (height, width, channels) in 0..1."""
    import matplotlib.image as mpimg

    with open(path, 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n', f'{path} is not a PNG'
    img = mpimg.imread(str(path))
    height, width = img.shape[:2]
    assert width >= min_width_px and height >= min_height_px, f'{path}: {width} x {height} px'
    rgb = np.round(img[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours, counts = np.unique(rgb, axis=0, return_counts=True)
    drawn = 1.0 - counts.max() / len(rgb)
    assert drawn > 0.01, f'{path} is blank: {100 * drawn:.2f} % of pixels off the background'
    assert len(colours) >= 16, f'{path} has only {len(colours)} colours'
    return img
