"""Draw the training curves of a run's metrics.jsonl into a PNG (no wandb account needed).

Panels, every one drawn for every run: Episode return; Episode length; Stage reached (mean
final and highest stage); Episode outcomes (win, death and truncation rates); Entropy; Approx KL
and Clip fraction, each with its health threshold (0.08 and 0.35); Value loss; Explained
variance; Learning rate; Gradient norm (before clipping); Steps per second; Action fractions
(move, siphon, program); Reward components (mean per step), the 15 components on a symlog scale.
A panel whose keys the run did not log reads "not logged". A dotted vertical line marks each
point where the run was resumed.

A run of another env than HackMatrix (the run's summary.json names it) gets only the panels
it logged: its stages, outcomes, actions and reward components are HackMatrix's, so those
panels are left out (and any other that it did not log).
"""

from hackmatrix.tools import cli


def main(argv=None) -> int:
    parser = cli.ArgumentParser(
        prog="plot_metrics.py", description=__doc__,
        epilog=cli.exit_codes_help(
            bad_arguments="bad arguments or an output file that cannot be written",
            missing_input="missing or unreadable run directory or metrics file, or one with "
                          "no record"))
    parser.add_argument("run_dir", metavar="RUN_DIR", type=cli.input_path,
                        help="run directory holding metrics.jsonl (or the metrics.jsonl file)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="output PNG, written at exactly this path whatever its extension; "
                             "its directory must exist (default: RUN_DIR/training_curves.png)")
    parser.add_argument("--smooth", type=int, default=1, metavar="N",
                        help="draw each curve as the moving average of its last N records "
                             "(default 1: as logged)")
    args = parser.parse_args(argv)
    cli.require_at_least_one(parser, {"--smooth": args.smooth})

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
            record_count = plotting.plot_run(run_dir, output, args.smooth)
        except plotting.MetricsError as error:
            raise cli.ToolError(str(error), cli.EXIT_BAD_CHECKPOINT) from None
        print(f"wrote {output} ({plotting.records_text(record_count)})")

    return cli.run_main(parser.prog, body)

