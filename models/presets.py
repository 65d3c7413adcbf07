"""The presets: scenarios by name (the TOML files in experiments/scenarios/, which the commands and calibration
both run), and a scenario's raw tree from a preset name or a file, parameter files and ``--set`` overrides."""

from __future__ import annotations

from pathlib import Path

from sim.scenario import ScenarioError, exists, merge, parse_value, read_toml, set_dotted

PRESETS = Path(__file__).resolve().parent.parent / "experiments" / "scenarios"


def resolve(scenario: str, sets: list[str] = (), params_files: list[str] = ()) -> tuple[dict, Path | None]:
    """The raw scenario tree: a preset name or TOML path, then parameter files, then ``--set`` overrides."""
    if len(scenario) > 1000:
        raise ScenarioError(f"{scenario[:60]}...: a scenario name or path of {len(scenario):,} characters is too long")
    path = Path(scenario)
    if scenario.endswith(".toml") or exists(path):
        tree, base = read_toml(path), path.parent
    elif exists(PRESETS / f"{scenario}.toml"):
        tree, base = read_toml(PRESETS / f"{scenario}.toml"), PRESETS
    else:
        names = ", ".join(sorted(p.stem for p in PRESETS.glob("*.toml")))
        raise ScenarioError(f"{scenario}: unknown preset and no such file (presets: {names})")
    for pf in params_files:
        tree = merge(tree, read_toml(Path(pf), "a parameter file"))
    for s in sets:
        if "=" not in s:
            raise ScenarioError(f"--set {s}: expected KEY=VALUE")
        key, text = s.split("=", 1)
        set_dotted(tree, key.strip(), parse_value(text.strip(), f"--set {key.strip()[:60]}"))
    return tree, base
