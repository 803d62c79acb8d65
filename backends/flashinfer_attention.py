"""Former home of the FlashInfer attention path, now `diffreason.attention` (core: the engine imports it).

This name stays importable and is the very same module object, so that `from diffreason.backends import
flashinfer_attention as fa` and patching `fa._kernel` still reach the code that runs.
"""

import sys

from diffreason import attention as _attention

sys.modules[__name__] = _attention
