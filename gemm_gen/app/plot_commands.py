"""gemm-gen roofline: PNG plots of the model's predictions, a roofline sweep and a heat map of the tilings
(matplotlib loads when the plots are drawn, app/plots.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..facts.atomic import check_output_dir, write_all
from ..spec.checks import check_config
from .choice import choice, say_chosen
from .cliargs import SIZE, counted, problem_args
from .plots import heatmap_png, pyplot, roofline_png

MAX_POINTS = 100_000  # sweep points: each is three model evaluations; a plot shows no more


def cmd_roofline(a: argparse.Namespace) -> int:
    out = check_output_dir(a.out_dir, "--out-dir")
    pyplot()  # an unusable plotting backend: one line before any work
    chosen = choice(a)
    config = check_config(chosen.config, budgets=False)  # as predict: a budget alone does not stop a prediction
    say_chosen("roofline", chosen)
    emulated = "bfp16emu" if config.kernel.emulate_bf16_with_bfp16 else ""
    name = (f"{config.array.device}_{config.types.dtype_in}{emulated}_"
            f"{config.types.dtype_out}_{'bcol' if config.layout.b_col_maj else 'brow'}")
    roof, roof_png = roofline_png(config,
                                  out / f"roofline_{name}_{config.tiling.m}x{config.tiling.k}x{config.tiling.n}.png",
                                  a.max_size,
                                  a.points)
    heat, heat_png = heatmap_png(config, out / f"heatmap_{name}_{config.size.M}x{config.size.K}x{config.size.N}.png")
    write_all({Path(roof["path"]): roof_png, Path(heat["path"]): heat_png})  # both or neither
    if a.json:
        print(json.dumps({"predicted": True, "roofline": roof, "heatmap": heat}, indent=1))
    else:
        print(f"wrote {roof['path']} ({roof['points']} predicted points, best {roof['best_tops']:.2f} TOPS)")
        print(f"wrote {heat['path']} ({heat['tilings']} tilings, best {heat['best_tops']:.2f} TOPS predicted)")
    return 0


def _roofline_flags(p: argparse.ArgumentParser) -> None:
    problem_args(p)
    p.add_argument("--out-dir", default="build", help="where the PNG files go (default build/)")
    p.add_argument("--max-size", type=SIZE, default=8192, help="largest M, K, N of the sweep")
    p.add_argument("--points", type=counted(1, MAX_POINTS, "a point count"), default=500,
                   help="problem sizes sampled for the sweep")
    p.set_defaults(func=cmd_roofline)


FLAGS = {"roofline": _roofline_flags}  # app/cli.py's COMMANDS names this module for it
