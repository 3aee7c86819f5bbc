"""Every legality and size rule of a design, written once (docs/rules.md lists where each lives).

Each rule is a function over ints or NumPy arrays: GemmConfig's checks call it with one design's
numbers, the search space (gemm_gen/search/space.py) with every candidate the tuner prices at once, so the
two cannot drift apart. This package sits below the config, the design and the model: it reads only the hardware
description and the bottom modules (dtypes, errors, precision, spec).
"""

from __future__ import annotations

from typing import Any

# an int, or a NumPy array of ints (one per candidate tiling); rules compute both alike
Ints = Any
