"""TVM's printing instruments: PrintBeforeAll, PrintAfterAll, PassPrintingInstrument, DumpIR."""

from __future__ import annotations

from pathlib import Path

from passel import ir, transform
from passel.instrument import DumpIR, PassPrintingInstrument, PrintAfterAll, PrintBeforeAll
from passel.transform import PassContext

TEXT = """
def @main(%x: Tensor[(4), f32]) -> Tensor[(4), f32] {
  let %k = multiply(2.0f, 0.5f);
  let %a = add(%x, %k);
  %a
}
"""


def pipeline() -> transform.Pass:
    return transform.Sequential([transform.get_pass("FoldConstant"), transform.get_pass("DeadCodeElimination")])


def test_print_before_all_and_after_all_print_every_pass_with_its_module(capsys):
    mod = ir.Module.parse(TEXT)
    with PassContext(opt_level=3, instruments=[PrintBeforeAll()]):
        out = pipeline()(mod)
    before = capsys.readouterr().out
    with PassContext(opt_level=3, instruments=[PrintAfterAll()]):
        pipeline()(mod)
    after = capsys.readouterr().out
    names = ["sequential", "FoldConstant", "InferType", "DeadCodeElimination"]
    assert [line for line in before.splitlines() if line.startswith("Before Running Pass: ")] == [
        f"Before Running Pass: PassInfo(name={n!r}, opt_level={lvl}, required={req})".replace("'", '"')
        for n, lvl, req in [
            ("sequential", 0, []),
            ("FoldConstant", 2, []),
            ("InferType", 0, []),
            ("DeadCodeElimination", 1, ["InferType"]),
        ]
    ]
    assert before.startswith(f"Before Running Pass: PassInfo(name=\"sequential\", opt_level=0, required=[])\n{mod}\n")
    # After-hooks come in completion order: the sequential's last, with the final module.
    after_names = [line.split('name="')[1].split('"')[0] for line in after.splitlines() if line.startswith("After")]
    assert after_names == names[1:] + ["sequential"]
    assert after.endswith(f"{out}\n")


def test_pass_printing_instrument_prints_only_the_named_passes(capsys):
    mod = ir.Module.parse(TEXT)
    inst = PassPrintingInstrument(print_before_pass_names=["FoldConstant"], print_after_pass_names=["FoldConstant"])
    with PassContext(opt_level=3, instruments=[inst]):
        folded = transform.get_pass("FoldConstant")(mod)
    assert capsys.readouterr().out == f"Print IR before: FoldConstant\n{mod}\n\n\nPrint IR after: FoldConstant\n{folded}\n\n\n"


def test_dump_ir_writes_one_numbered_file_per_pass_and_refreshes_only_its_own_dumps(tmp_path: Path, capsys):
    mod = ir.Module.parse(TEXT)
    dump = tmp_path / "dump"
    with PassContext(opt_level=3, instruments=[DumpIR(dump)]):
        out = pipeline()(mod)
    files = sorted(p.name for p in dump.iterdir())
    assert files == ["000_FoldConstant.pir", "001_InferType.pir", "002_DeadCodeElimination.pir", "003_sequential.pir"]
    assert (dump / "003_sequential.pir").read_text() == out.script()
    # A refresh removes a directory of dumps...
    DumpIR(dump, refresh=True)
    assert not dump.exists()
    # ...but keeps one holding anything else, with a warning.
    dump.mkdir()
    (dump / "notes.txt").write_text("mine")
    capsys.readouterr()
    DumpIR(dump, refresh=True)
    assert (dump / "notes.txt").exists()
    assert "WARNING: Skipping removal" in capsys.readouterr().out
    # A pass name with characters not allowed in file names.
    weird = transform.module_pass(lambda m, c: m, opt_level=0, name="a/b:c")
    with PassContext(instruments=[DumpIR(tmp_path / "w")]):
        weird(mod)
    assert [p.name for p in (tmp_path / "w").iterdir()] == ["000_a_b_c.pir"]
