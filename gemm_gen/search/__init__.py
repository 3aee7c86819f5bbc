"""Choosing a design, one named step: `choose(request, params, measure)` (choosing.py) takes the space
of tilings the rules allow (gemm_gen/search/space.py), has the model price it (gemm_gen/model/), ranks it
(tune.py; tune_many.py for one design serving several sizes, the rules of each size's call applied too),
and lets a measurement the caller passes re-rank them. Only the application layer calls it."""

from .choosing import (
           KERNEL_NAMES,
           MEASURED_FINALISTS,
           Choice,
           KernelOption,
           Measure,
           choose,
           measure_candidates,
           open_config,
)
from .knobs import KNOBS, Knob, Variant, variants

__all__ = ["KERNEL_NAMES", "MEASURED_FINALISTS", "Choice", "KernelOption", "Measure", "choose",
           "measure_candidates", "open_config", "KNOBS", "Knob", "Variant", "variants"]
