"""Evaluate checkpoints against the built-in baselines over many parallel episodes.

Every policy plays the same N games (the boards come from --seed), vmapped and jitted. Reported
per policy: mean +- std return, mean and max stage reached, win rate, mean score and episode
length, action-type fractions and the programs used. Episodes are capped at --max-steps steps;
capped episodes count as truncated.

Policies: each CHECKPOINT (a .pkl, a params .npz or a run directory), the newest checkpoint
with --latest, and the baselines named by --baselines: `random` (uniform over valid actions)
and `exit-runner` (walks a shortest path to the exit, attacking what blocks it). With no
CHECKPOINT and no --latest only the baselines are evaluated, which gives their reference
numbers.
"""

from hackmatrix import stdout_reader
from hackmatrix.tools import cli

BASELINE_NAMES = ("random", "exit-runner")


def _parse_baselines(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if names == ["none"]:
        return []
    if "none" in names:
        raise ValueError("--baselines none means no baselines: it cannot be combined with others")
    unknown = [name for name in names if name not in BASELINE_NAMES]
    if unknown:
        raise ValueError(f"unknown baseline {unknown[0]!r} (choose from {', '.join(BASELINE_NAMES)} "
                         f"or none)")
    twice = [name for name in BASELINE_NAMES if names.count(name) > 1]
    if twice:  # one row and one JSON key per policy, as for a checkpoint given twice
        raise ValueError(f"baseline {twice[0]!r} is given twice")
    return names


def _reject_duplicates(sources: list[str], files: list, baseline_names: list[str]) -> None:
    """Every policy is one row and one JSON key: the same checkpoint twice (under any spelling,
    --latest included) or a checkpoint named like a baseline would merge two results into one.
    Exit 3, before anything is loaded."""
    first_source_of = {}
    for source, file in zip(sources, files):
        if source in baseline_names:
            raise cli.ToolError(f"checkpoint {source!r} has the name of a baseline: write "
                                f"./{source}", cli.EXIT_BAD_ARGUMENTS)
        identity = file.resolve()
        if identity in first_source_of:
            earlier = first_source_of[identity]
            raise cli.ToolError(f"{source} is given twice" if earlier == source else
                                f"{earlier} and {source} are the same checkpoint ({file})",
                                cli.EXIT_BAD_ARGUMENTS)
        first_source_of[identity] = source


def main(argv=None) -> int:
    parser = cli.ArgumentParser(
        prog="evaluate.py", description=__doc__,
        epilog=cli.exit_codes_help(
            bad_arguments="bad arguments, a --json file that cannot be written, or one policy "
                          "given twice",
            missing_input="missing or incompatible checkpoint or run directory"))
    parser.add_argument("checkpoints", nargs="*", metavar="CHECKPOINT", type=cli.input_path,
                        help=".pkl checkpoint, params .npz or run directory (none: the "
                             "baselines only)")
    parser.add_argument("--latest", action="store_true",
                        help="also evaluate the newest policy file (checkpoint .pkl or params .npz) "
                             "under --checkpoint-dir")
    parser.add_argument("--checkpoint-dir", default="checkpoints",
                        help="where --latest looks, run folders included (default: checkpoints)")
    parser.add_argument("--baselines", default="random,exit-runner", metavar="NAMES",
                        help="comma-separated baselines: random, exit-runner, or none "
                             "(default: random,exit-runner)")
    parser.add_argument("--episodes", type=int, default=256, metavar="N",
                        help="episodes per policy, run in parallel (default: 256, at most "
                             f"{cli.MAX_BATCHED_EPISODES:,})")
    parser.add_argument("--seed", type=cli.seed, default=0,
                        help="seed of the boards and of sampling (default 0)")
    parser.add_argument("--max-steps", type=int, default=2000, metavar="N",
                        help="steps after which an episode is cut off (default: %(default)s, the "
                             f"training env's episode limit; at most {cli.MAX_EPISODE_STEPS:,})")
    parser.add_argument("--deterministic", action="store_true",
                        help="checkpoints pick the most probable valid action (default: sample)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    try:
        baseline_names = _parse_baselines(args.baselines)
    except ValueError as error:
        parser.error(str(error))
    cli.require_at_least_one(parser, {"--episodes": args.episodes,
                                      "--max-steps": args.max_steps})
    cli.require_at_most(parser, {"--episodes": (args.episodes, cli.MAX_BATCHED_EPISODES),
                                 "--max-steps": (args.max_steps, cli.MAX_EPISODE_STEPS)})
    if not (args.checkpoints or args.latest or baseline_names):
        parser.error("nothing to evaluate: give a CHECKPOINT, --latest or --baselines")

    def body():
        if args.json is not None:
            cli.check_output_file(args.json, "--json", inputs=args.checkpoints)
            stdout_reader.keep_working_if_stdout_closes()
        if not (args.checkpoints or args.latest):
            # At once: loading JAX and compiling take a while, and the table will hold no
            # checkpoint.
            print(f"no CHECKPOINT given: evaluating the baselines only "
                  f"({', '.join(baseline_names)})")

        # Before the imports: a module may compute a constant with JAX, i.e. compile.
        cli.start_jax(parser.prog)
        import json
        import pathlib

        import jax

        from hackmatrix.tools import baselines, evaluation, policy, report
        from hackmatrix.training import checkpoint as ckpt

        sources = list(args.checkpoints)
        for source in sources:
            if source in BASELINE_NAMES and not pathlib.Path(source).exists():
                raise cli.ToolError(f"{source!r} is a baseline, not a checkpoint: baselines are "
                                    "chosen with --baselines (default: random,exit-runner)",
                                    cli.EXIT_BAD_ARGUMENTS)
        if args.latest:
            sources.append(str(policy.latest_checkpoint(args.checkpoint_dir)))
        # Resolved once: a run still training may write a newer file before loading ends.
        files = [policy.resolve_policy_file(source) for source in sources]
        _reject_duplicates(sources, files, baseline_names)
        loaded = [policy.load_policy(source, file) for source, file in zip(sources, files)]
        policies = [policy.network_policy(checkpoint, args.deterministic, name=source)
                    for source, checkpoint in zip(sources, loaded)]
        policies += [baselines.baseline(name) for name in baseline_names]

        mode = "greedy" if args.deterministic else "sampled"
        print(f"{args.episodes} episodes per policy, seed {args.seed}, max {args.max_steps} "
              f"steps, checkpoints {mode}")
        for source, checkpoint in zip(sources, loaded):
            print(f"{source}: {checkpoint.file} ({checkpoint.architecture})")
        key = jax.random.key(args.seed)
        summaries = {}
        for candidate in policies:
            results = evaluation.run_episodes(candidate, key, args.episodes, args.max_steps)
            summaries[candidate.name] = evaluation.summarise(results)
        for source, checkpoint in zip(sources, loaded):
            summaries[source]["checkpoint_file"] = str(checkpoint.file)
        print(report.evaluation_table(summaries))
        if args.json is not None:
            text = json.dumps(summaries, indent=2) + "\n"
            ckpt.atomic_write(pathlib.Path(args.json), lambda file: file.write(text.encode()))
            print(f"wrote {args.json}")

    return cli.run_main(parser.prog, body)

