"""Each plausible model's figures on the reference test, so that a range can bound figures, not only parameters.

A plausible-models file (``NAME.plausible.json``, written by ``calibration.fit``: calibration/report.py) lists the
parameter sets the data do not tell apart. ``--uncertainty`` (experiments/uncertainty.py) cannot run them all for
every question, so it runs the kept model, each parameter's extremes, and, from what this module records, the models
that give the least and the greatest of each figure of the reference way nearest the question. A model between two
parameter extremes can give a figure beyond both (a fast start limit with a fast autoscaler); recording the figures
makes the range hold every plausible model's figures on the reference test at the seeds recorded, by construction,
and, elsewhere, the models that bound them there.

``annotate`` runs every model of a file on every way of the reference test (calibration/ways, docs/sources.md §1)
at the fit's seeds and writes each model's figures, per seed, into the file; the fit calls it on each file it
writes, and ``python -m calibration.plausible FILE...`` re-annotates files written before (their models unchanged).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from calibration.objective import Runner, reference, simulate
from calibration.targets import APPROACHES, CALLS, CONTAINERS, FIRST, LATENCIES
from models.runs import load_scenario
from sim import files
from sim.cli import ArgParser
from sim.scenario import ScenarioError

FIGURES = (CALLS, FIRST, *LATENCIES, CONTAINERS)  # every figure the reference test reports (fitted or kept aside)


def way_of(name: str) -> dict:
    """What a reference way runs, for matching a question to it: its approach and its app copies."""
    sc = load_scenario(reference(name).preset, [], [])
    return {"approach": sc.approach, "copies": sc.function.copies}


def annotate(path: Path, jobs: int, seeds: list[int], extra: list[str] = ()) -> int:
    """Run every model of the plausible-models file ``path`` on every reference way at ``seeds`` (``extra`` on
    every run, as the fit's), and write each model's figures (``figures``: way → figure → one value per seed) and
    what was run (``figures_of``) into it. Returns the number of runs."""
    doc = files.read_json(path, "a plausible-models file")
    models = doc["models"]
    runs = [(m, way, seed) for m in models for way in APPROACHES for seed in seeds]
    jobs_list = [(reference(way), (*extra, *m["settings"]), seed, FIGURES) for m, way, seed in runs]
    with Runner(jobs) as runner:
        results = iter(runner.map(simulate, jobs_list))
    for m in models:
        m["figures"] = {
            way: {k: [r[k] for r in runs] for k in FIGURES}
            for way in APPROACHES
            for runs in [[next(results) for _ in seeds]]
        }
    doc["figures_of"] = {
        "seeds": list(seeds),
        "extra": list(extra),
        "ways": {way: way_of(way) for way in APPROACHES},
    }
    files.write_text(path, json.dumps(doc, indent=1) + "\n")
    return len(jobs_list)


def main(argv: list[str] | None = None) -> int:
    ap = ArgParser(
        prog="python -m calibration.plausible",
        description="Record each plausible model's figures on the reference test (what --uncertainty's ranges "
        "bound), in place.",
    )
    ap.add_argument("files", nargs="+", type=Path, help="plausible-models files (NAME.plausible.json)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1, as the fit's (default 2)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = ap.parse_args(argv)
    if not 1 <= args.seeds <= 64 or not 1 <= args.jobs <= 64:
        print("--seeds and --jobs: between 1 and 64", file=sys.stderr)
        return 2
    for path in args.files:
        try:
            runs = annotate(path, args.jobs, list(range(args.seeds)))
        except (ScenarioError, KeyError, TypeError) as e:
            print(f"{path}: not a plausible-models file ({e})", file=sys.stderr)
            return 2
        print(f"{path}: {runs} runs recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
