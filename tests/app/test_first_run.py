"""What a laptop owner must look at first (issue 18, item 5): one ordered list, FIRST_RUN_CHECKS in
app/validate.py, that `make validate` prints and docs/hardware_path.md's last section holds word
for word, so the two cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from gemm_gen.app import validate

from ..backends.test_doctor import laptop  # noqa: F401 - npu_laptop's fixture
from .test_validate import npu_laptop  # noqa: F401 - the fixture

DOC = Path(__file__).parents[2] / "docs" / "hardware_path.md"
HEADING = "## What the first run on each device confirms or refutes"


def _doc_list() -> list[str]:
    text = DOC.read_text()
    assert HEADING in text, f"docs/hardware_path.md lost its section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if re.match(r"\d+\. ", line)]


def test_the_doc_list_is_the_one_validate_prints():
    want = validate.first_run_lines(markdown=True)
    assert _doc_list() == want, "regenerate the list from validate.first_run_lines(markdown=True):\n" + "\n".join(want)


def test_each_check_says_what_to_look_at_and_what_confirms_or_refutes_it():
    titles = [c.title for c in validate.FIRST_RUN_CHECKS]
    # most likely to fail first: the kernels no compiler has seen, the build's checks, then the runs
    assert [t.split()[1] for t in titles] == ["wide-accumulator", "frames", "L1", "runs", "accumulator's", "parameters",
                                              "LUT", "epilogue", "host", "matches", "shim", "split"]
    for line in validate.first_run_lines():
        assert re.fullmatch(r"\d+\. [^\n]+ Look at [^\n]+\. Confirms: [^\n]+\. Refutes: [^\n]+\.", line), line


def test_the_acc64_rows_the_list_names_are_the_sweeps_i16_rows():
    """The list sends the owner to the i16 fit rows for the acc64 round trip: on both devices those rows
    are the ones whose mmul accumulates in 64 bits, with the shapes the list names."""
    text = " ".join(validate.first_run_lines())
    for dev in ("npu1", "npu2"):
        rows = [i.config for i in validate.sweep(dev, chess=False) if i.role == "fit"]
        wide = {c.types.dtype_in for c in rows if c.acc_bits == 64}
        assert wide == {"i16"}
        shapes = {"x".join(map(str, c.kernel.mmul)) for c in rows if c.acc_bits == 64}
        assert len(shapes) == 1 and f"{dev} {shapes.pop()}" in text


def test_the_epilogue_rows_the_list_names_compare_two_opt_levels():
    """Issue 31 item 12: on both devices the sweep holds the epilogue design the list names, built once at Peano's
    default -O2 and once at -O1, two builds that share no cache entry or object file, each checked against the
    simulator (run_item); its kernel is llvm-aie #1262's combination, the K loop's macs and a LUT activation."""
    from gemm_gen.backends.kernel_source import render_kernel
    from gemm_gen.design import build_design
    from gemm_gen.spec.rules import peano

    text = " ".join(validate.first_run_lines())
    assert "#1262" in text and "-O2" in text and "-O1" in text
    for dev in ("npu1", "npu2"):
        rows = [i for i in validate.sweep(dev, chess=False) if "SiLU epilogue" in i.name]
        levels = [i.config.kernel.opt_level for i in rows]
        assert levels == [peano.DEFAULT_OPT_LEVEL, 1] and all(i.role == "check" for i in rows)
        a, b = (i.config for i in rows)
        assert a.with_(opt_level=b.kernel.opt_level) == b  # the same design but for the level
        assert a.suffix != b.suffix
        builds = [build_design(c).kernels[0].build for c in (a, b)]
        assert builds[0].object_file != builds[1].object_file
        source = render_kernel(builds[0])
        assert a.epilogue.activation.value == "silu" and a.epilogue.bias and "mac(" in source and "tanh" in source


def test_validate_json_carries_the_list(npu_laptop, capsys):  # noqa: F811
    import json

    from gemm_gen.app.cli import main

    from .test_validate import NPU_NOW

    NPU_NOW[0] = "npu2"
    assert main(["validate", "--dev", "npu2", "--only", "fit", "--iters", "1", "--warmup", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["first_run_checks"] == validate.first_run_lines()
