"""An import profile as the container-start model's program keys (calibration/program.py): measured in a fresh
interpreter, turned into keys a scenario takes, and bad input as one line."""

from __future__ import annotations

import pytest

from calibration import program
from models.runs import load_scenario


def test_a_measured_import_is_keys_a_scenario_takes(capsys):
    p = program.measure(["json"])
    assert p.files > 0 and p.read_mib > 0 and p.import_s >= 0 and p.rss_mib > 0
    keys = program.keys(p)
    assert keys["distinct_files"] == p.files and keys["file_ops"] == round(p.files * 32_302 / 1_335)
    assert program.keys(p, file_ops=7)["file_ops"] == 7  # a count of your own wins over the ratio
    sets = [f"coldstart.program.{k}={v}" for k, v in keys.items()]
    assert load_scenario("coldstart-torch", sets, []).coldstart.program.read_mib == keys["read_mib"]
    assert program.main(["json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("import json: ") and all(line.startswith("--set coldstart.program.") for line in out[1:])


def test_the_packages_size_alone_reads_slackers_share_at_the_torch_presets_density():
    keys = program.from_packages(400 / 0.064)  # the torch preset's read at Slacker's share: its files and operations
    assert keys == {"file_ops": 32_302, "distinct_files": 1_335, "read_mib": 400.0}
    assert program.from_packages(100, share=0.5)["read_mib"] == 50.0


@pytest.mark.parametrize(
    "argv, says", [(["no_such_module_xyz"], "no_such_module_xyz"), (["json", "--file-ops", "-1"], "--file-ops")]
)
def test_bad_input_is_one_line_exit_2(capsys, argv, says):
    try:
        code = program.main(argv)
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
