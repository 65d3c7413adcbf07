"""Several scenarios' time series on one figure: ``python -m experiments.compare SCENARIO... [--set K=V]...
[--seed N] --out PNG``.

Each curve is one run (the same ``--set``s applied to every scenario): the first line of its model's time series
(sandboxes created, inputs started, ...) against simulated time.
"""

from __future__ import annotations

import sys

from sim.cli import ArgParser, add_set_option, main_guard, out_path
from sim.files import check_out
from sim.scenario import ScenarioError

MAX_TITLE = 300  # a title's characters: a megabyte of text would take gigabytes to lay out


def main(argv: list[str] | None = None) -> int:
    p = ArgParser(prog="python -m experiments.compare", description=__doc__.splitlines()[0])
    p.add_argument("scenarios", nargs="+", help="preset names or scenario files")
    add_set_option(p, "override a scenario key of every scenario (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=out_path, required=True, help="the PNG to write")
    p.add_argument("--title", default="")
    args = p.parse_args(argv)

    def go() -> int:
        from experiments.plots import pyplot  # (matplotlib and the models, here: --help loads neither)
        from models.registry import MODELS
        from models.runs import load_scenario, run_scenario, warn_extrapolated

        if len(args.title) > MAX_TITLE or not args.title.isprintable():
            raise ScenarioError(f"--title: printable text of at most {MAX_TITLE} characters, got {len(args.title):,}")
        check_out(args.out)
        scenarios = [(name, load_scenario(name, args.sets, [])) for name in args.scenarios]  # all checked first
        plt = pyplot()  # off screen, labels as plain text (a user's $ too)
        fig, ax = plt.subplots(figsize=(8, 4.8))
        try:
            for name, sc in scenarios:
                series: dict = {}
                m = run_scenario(sc, seed=args.seed, series=series)
                model = MODELS[sc.model]
                key, what = model.timeseries.lines[0]
                rate = next((k for k in model.headline if k.endswith("_per_s")), None)
                label = f"{sc.name or name}: {m[rate]:,.0f} {rate}" if rate else f"{sc.name or name}"
                if m.get(model.bottleneck):
                    label += f", {model.bottleneck} {m[model.bottleneck]}"
                ax.plot(series["t"], series[key], label=label)
                ax.set_ylabel(what)
                print(f"{name}: done ({m['wall_s']:.1f} s wall)", file=sys.stderr)
                warn_extrapolated(m["extrapolated"], f" ({name})")
            ax.set_xlabel("simulated time, s")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
            ax.set_title(args.title or ", ".join(args.scenarios))
            args.out.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(args.out, dpi=110, bbox_inches="tight", format="png")  # at --out exactly, whatever its suffix
        finally:
            plt.close(fig)
        print(args.out)
        return 0

    return main_guard("experiments.compare", go)


if __name__ == "__main__":
    sys.exit(main())
