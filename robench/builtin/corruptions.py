"""Register the 19 image corruptions of ImageNet-C (15 test + 4 extra), 5 severities each."""

from __future__ import annotations

import functools

from robench import hookimpl
from robench.specs import CorruptionSpec


def _apply(images, severity: int, seed: int, *, library_name: str):
    from robench.corruptions import corrupt_images

    return corrupt_images(images, library_name, severity, seed)


@hookimpl
def register_corruptions(register):
    """Register gaussian-noise ... saturate (imagecorruptions-imaug, called per image)."""
    from robench.corruptions import EXTRA, IMAGENET_C

    for family, names in list(IMAGENET_C.items()) + [("extra", EXTRA)]:
        for lib_name in names:
            register(CorruptionSpec(
                name=lib_name.replace("_", "-"),
                apply=functools.partial(_apply, library_name=lib_name),
                description=(f"{'ImageNet-C' if family != 'extra' else 'ImageNet-C extra'} "
                             f"{family} corruption '{lib_name}' (imagecorruptions-imaug), "
                             "severities 1-5"),
                version="1",
                severities=5,
                family=family,
                imagenet_c=family != "extra",
            ))
