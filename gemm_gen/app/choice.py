"""Choosing a design, the one named step between a command's flags and the design it uses: the flags
give the base config and the pins (app/cliargs.py), search.choose fills in what is open, and the
commands that build, run or write a design say in one line what was chosen before they use it."""

from __future__ import annotations

import argparse
import sys

from .. import search
from ..config import GemmConfig
from ..search import Choice
from .cliargs import request


def choice(a: argparse.Namespace) -> Choice:
    """What search.choose makes of the request the flags give."""
    return search.choose(request(a))


def choose_design(a: argparse.Namespace) -> GemmConfig:
    """The design a command's flags ask for: search.choose on their request."""
    return choice(a).config


def chosen_text(command: str, chosen: Choice) -> str | None:
    """One line naming what search.choose filled in, with the flags that pin it; None when the
    request pinned the whole tiling (and a bfp16 B's packing), so that nothing was chosen."""
    if not chosen.chose_anything:
        return None
    c, packing = chosen.config, "b_pack" in chosen.filled
    flags = f"-m {c.m} -k {c.k} -n {c.n} --k-mt {c.k_mt} --rho {c.rho}" + (f" --b-pack {c.b_pack}" if packing else "")
    packed = f", B packed in {c.b_pack}" if packing else ""
    return (f"gemm-gen {command}: chose tiles {c.m}x{c.k}x{c.n}, k_mt {c.k_mt}, rho {c.rho}{packed} "
            f"for {c.device} {c.M}x{c.K}x{c.N} (to pin them: {flags})")


def say_chosen(command: str, chosen: Choice) -> None:
    """chosen_text on stderr, once the design is built and before the command uses it (a design that
    fails its checks says only why; stdout keeps the command's output and --json)."""
    text = chosen_text(command, chosen)
    if text is not None:
        print(text, file=sys.stderr, flush=True)
