"""The 19 ImageNet-C corruptions (15 benchmark + 4 extra) and style transfer (group "style"), registered on import."""

from . import blur, digital, elastic, noise, style_transfer, weather  # noqa: F401
