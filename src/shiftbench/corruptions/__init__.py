"""The corruption engine's operations, registered on import.

Namespace ``"imagenet_c"`` (the default): the 19 ImageNet-C corruptions (15 benchmark + 4 extra),
in :mod:`.noise`, :mod:`.blur`, :mod:`.weather`, :mod:`.digital` and :mod:`.elastic`.
Namespace ``"noc"``: the 25 candidate corruptions of the overlap study (:mod:`.candidates`).
Namespace ``"style"``: style transfer as a corruption (:mod:`.style_transfer`).
"""

from . import blur, candidates, digital, elastic, noise, style_transfer, weather  # noqa: F401
