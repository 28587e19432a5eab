#!/usr/bin/env python
"""Draw the training curves of a run's metrics.jsonl into a PNG (no wandb account needed).

Panels: episode return and length; entropy, approx_kl and clip_fraction with the health
thresholds (approx_kl 0.08, clip_fraction 0.35); steps per second; the 15 reward components;
action fractions. Keys a run did not log are skipped.
"""

from hackmatrix.tools import cli


def main(argv=None) -> int:
    parser = cli.ArgumentParser(prog="plot_metrics.py", description=__doc__)
    parser.add_argument("run_dir", metavar="RUN_DIR",
                        help="run directory holding metrics.jsonl (or the metrics.jsonl file)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="output PNG, written at exactly this path whatever its extension; "
                             "its directory must exist (default: RUN_DIR/training_curves.png)")
    args = parser.parse_args(argv)

    def body():
        import pathlib

        run_dir = pathlib.Path(args.run_dir)
        folder = run_dir if run_dir.is_dir() else run_dir.parent
        given = args.output is not None
        output = args.output if given else str(folder / "training_curves.png")
        # The default's folder is checked too: a missing RUN_DIR is reported below as such (6).
        if given or folder.is_dir():
            cli.check_output_file(output, "-o" if given else "output", inputs=(args.run_dir,))

        from hackmatrix.tools import plotting

        try:
            record_count = plotting.plot_run(run_dir, output)
        except plotting.MetricsError as error:
            raise cli.ToolError(str(error), cli.EXIT_BAD_CHECKPOINT) from None
        print(f"wrote {output} ({plotting.records_text(record_count)})")

    return cli.run_main(parser.prog, body)


if __name__ == "__main__":
    cli.exit_process(main())
