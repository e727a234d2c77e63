"""The template's torch network (imported only when a model is built: it imports torch).

CHANGE (3): replace ``TemplateCNN`` with your network. What robench needs from it is listed in
the package docstring (``robench_template/__init__.py``).
"""

from __future__ import annotations

from torch import nn


class TemplateCNN(nn.Module):
    """Two 3x3 conv blocks, a ReLU fully connected layer (the features) and a linear head.

    The first block halves the image with a 2x2 max-pool and the second ends in a 4x4
    adaptive average pool, so one network takes 8x8 digits and 28x28 MNIST alike.

    Parameters
    ----------
    image_shape : tuple of int
        ``(channels, height, width)``; inputs arrive flat, ``C*H*W`` values a row.
    n_classes : int
        Number of output logits.
    channels : tuple of int
        Output channels of the two conv blocks.
    width : int
        Width of the fully connected layer, the penultimate feature width.
    """

    def __init__(self, image_shape: tuple, n_classes: int, channels: tuple = (8, 16),
                 width: int = 64):
        super().__init__()
        self.image_shape = tuple(int(s) for s in image_shape)
        c_in, c_mid, c_out = self.image_shape[0], channels[0], channels[1]
        self.conv = nn.Sequential(
            nn.Conv2d(c_in, c_mid, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c_mid, c_out, kernel_size=3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.fc = nn.Sequential(nn.Linear(c_out * 4 * 4, width), nn.ReLU())
        self.head = nn.Linear(width, n_classes)

    def conv_features(self, x):
        """Return the last conv block's output, flattened (the layer coverage reads)."""
        return self.conv(x.reshape(x.shape[0], *self.image_shape)).flatten(1)

    def from_conv_features(self, z):
        """Return class logits from flattened :meth:`conv_features` ``z``."""
        return self.head(self.fc(z))

    def features(self, x):
        """Return the penultimate activations (the head's input) of flat image rows ``x``."""
        return self.fc(self.conv_features(x))

    def forward(self, x):
        """Return class logits for flat image rows ``x``."""
        return self.head(self.features(x))
