"""Register the 19 image corruptions of ImageNet-C (15 test + 4 extra), 5 severities each.

Every corruption is at version 1 except ``spatter`` at 2 (robench's fixed copy, see
:func:`robench.data.corruptions.spatter`); a version is part of every key that uses it.
"""

from __future__ import annotations

import functools

from robench import hookimpl
from robench.specs import CorruptionSpec
from robench.data.corruptions import EXTRA, IMAGENET_C, corrupt_images


def _apply(images, severity: int, seed: int, *, library_name: str):
    return corrupt_images(images, library_name, severity, seed)


#: Library names whose output changed since version 1, with their current version.
VERSIONS = {"spatter": "2"}  # 2: no all-NaN images when the liquid mask is empty
_NOTES = {"spatter": "; robench's copy, an empty liquid mask means no spatter"}


@hookimpl
def register_corruptions(register):
    """Register gaussian-noise ... saturate (imagecorruptions-imaug, called per image)."""
    for family, names in list(IMAGENET_C.items()) + [("extra", EXTRA)]:
        for lib_name in names:
            register(CorruptionSpec(
                name=lib_name.replace("_", "-"),
                apply=functools.partial(_apply, library_name=lib_name),
                description=(f"{'ImageNet-C' if family != 'extra' else 'ImageNet-C extra'} "
                             f"{family} corruption '{lib_name}' (imagecorruptions-imaug"
                             f"{_NOTES.get(lib_name, '')}), severities 1-5"),
                version=VERSIONS.get(lib_name, "1"),
                severities=5,
                family=family,
                imagenet_c=family != "extra",
            ))
