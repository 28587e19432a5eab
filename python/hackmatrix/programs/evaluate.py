"""Evaluate checkpoints against the built-in baselines over many parallel episodes.

Every policy plays the same N games (the boards come from --seed), vmapped and jitted. Reported
per policy: mean +- std return, mean and max stage reached, win rate, mean score and episode
length, action-type fractions and the programs used. Episodes are capped at --max-steps steps;
capped episodes count as truncated.

Policies: each CHECKPOINT (a .pkl, a params .npz or a run directory), the newest checkpoint
with --latest, and the baselines named by --baselines: `random` (uniform over valid actions)
and `exit-runner` (walks a shortest path to the exit, attacking what blocks it). With no
CHECKPOINT and no --latest only the baselines are evaluated, which gives their reference
numbers. A run trained with --num-seeds K holds K agents: --agent I picks one (default 0).

A run trained on another env (`--env` of the trainer, e.g. a gymnax id) is evaluated on that
env, which its checkpoint records: each policy's mean +- std, min and max return, mean episode
length and the share of episodes cut off at --max-steps (default there: the env's own episode
limit); the baseline is `random` (uniform over its actions), and HackMatrix's figures and
exit-runner do not apply. The checkpoints of one command share one env. --env ID names the
env of a params file that records none (one copied out of its run), or of the baselines alone.
"""

from hackmatrix.shell import stdout_reader
from hackmatrix.tools import cli, policy_env

BASELINE_NAMES = ("random", "exit-runner")
HACKMATRIX_MAX_STEPS = 2000  # evaluation.DEFAULT_MAX_STEPS, before JAX is imported
HACKMATRIX_BASELINES = "random,exit-runner"  # --baselines' default, of HackMatrix
OTHER_ENV_BASELINES = ("random",)              # the only baseline that plays any env


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
    parser.add_argument("--baselines", metavar="NAMES",
                        help="comma-separated baselines: random, exit-runner (HackMatrix only), "
                             "or none (default: random,exit-runner; random for another env)")
    parser.add_argument("--agent", type=cli.agent, default=0, metavar="I",
                        help=cli.AGENT_HELP + "; the same for every CHECKPOINT")
    parser.add_argument("--episodes", type=int, default=256, metavar="N",
                        help="episodes per policy, run in parallel (default: 256, at most "
                             f"{cli.MAX_BATCHED_EPISODES:,})")
    parser.add_argument("--seed", type=cli.seed, default=0,
                        help="seed of the boards and of sampling (default 0)")
    parser.add_argument("--max-steps", type=int, metavar="N",
                        help=f"steps after which an episode is cut off (default: "
                             f"{HACKMATRIX_MAX_STEPS}, the training env's episode limit; another "
                             f"env's own limit; at most {cli.MAX_EPISODE_STEPS:,})")
    parser.add_argument("--deterministic", action="store_true",
                        help="checkpoints pick the most probable valid action (default: sample)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--env", metavar="ID",
                        help="the env of the checkpoints: needed only for a params file that "
                             "records none, or to evaluate the baselines on another env than "
                             "HackMatrix (default: the checkpoints' own)")
    args = parser.parse_args(argv)
    other_env = args.env not in (None, policy_env.HACKMATRIX)  # known here only from --env
    try:
        baseline_names = (list(OTHER_ENV_BASELINES) if other_env and args.baselines is None
                          else _parse_baselines(HACKMATRIX_BASELINES if args.baselines is None
                                                else args.baselines))
    except ValueError as error:
        parser.error(str(error))
    if other_env and _other_env_baselines_problem(baseline_names, args.env):
        parser.error(_other_env_baselines_problem(baseline_names, args.env))
    max_steps = HACKMATRIX_MAX_STEPS if args.max_steps is None else args.max_steps
    cli.require_at_least_one(parser, {"--episodes": args.episodes, "--max-steps": max_steps})
    cli.require_at_most(parser, {"--episodes": (args.episodes, cli.MAX_BATCHED_EPISODES),
                                 "--max-steps": (max_steps, cli.MAX_EPISODE_STEPS)})
    if args.env is not None and not (args.env.strip() and args.env.isprintable()):
        parser.error(f"--env must be an env id, got {args.env!r}")
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
        import pathlib

        from hackmatrix.tools import baselines, evaluation, policy, report

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
        loaded = [policy.load_policy(source, file, args.env, args.agent)
                  for source, file in zip(sources, files)]
        env_id = _one_env(sources, loaded, args.env)
        if env_id != policy_env.HACKMATRIX:
            summaries = _evaluate_other_env(env_id, args, sources, loaded)
            _write_json(args.json, summaries)
            return
        policies = [policy.network_policy(checkpoint, args.deterministic, name=source)
                    for source, checkpoint in zip(sources, loaded)]
        policies += [baselines.baseline(name) for name in baseline_names]
        summaries = _play_all(
            policies, sources, loaded, args, max_steps, "",
            lambda candidate, key: evaluation.run_episodes(candidate, key, args.episodes,
                                                           max_steps),
            evaluation.summarise, report.evaluation_table)
        _write_json(args.json, summaries)

    return cli.run_main(parser.prog, body)


def _one_env(sources: list[str], loaded: list, env_flag: str | None) -> str:
    """The env every checkpoint was trained on (exit 3 when they differ): --env, or HackMatrix
    for the baselines alone."""
    envs = {checkpoint.env_id: source for source, checkpoint in zip(sources, loaded)}
    if len(envs) > 1:
        (first, first_source), (second, second_source) = list(envs.items())[:2]
        raise cli.ToolError(f"{first_source} was trained on {first}, {second_source} on "
                            f"{second}: evaluate one env at a time", cli.EXIT_BAD_ARGUMENTS)
    if envs:
        return next(iter(envs))
    return policy_env.HACKMATRIX if env_flag is None else env_flag


def _evaluate_other_env(env_id: str, args, sources: list[str], loaded: list) -> dict:
    """The checkpoints and the random baseline on `env_id`, which is not HackMatrix: prints
    the table and returns the summaries, one per policy."""
    from hackmatrix.tools import baselines, env_evaluation, policy

    names = list(OTHER_ENV_BASELINES) if args.baselines is None else _parse_baselines(
        args.baselines)
    problem = _other_env_baselines_problem(names, env_id)
    if problem:
        raise cli.ToolError(problem, cli.EXIT_BAD_ARGUMENTS)
    env = policy_env.make_tool_env(env_id)
    max_steps = (policy_env.episode_limit(env, HACKMATRIX_MAX_STEPS) if args.max_steps is None
                 else args.max_steps)
    policies = [policy.network_policy(checkpoint, args.deterministic, name=source)
                for source, checkpoint in zip(sources, loaded)]
    policies += [baselines.baseline(name) for name in names]
    return _play_all(
        policies, sources, loaded, args, max_steps, f" on {env_id}",
        lambda candidate, key: env_evaluation.run_env_episodes(env, candidate, key,
                                                               args.episodes, max_steps),
        lambda results: env_evaluation.summarise(results, env_id),
        env_evaluation.evaluation_table)


def _play_all(policies, sources, loaded, args, max_steps: int, where: str, play, summarise,
              table) -> dict:
    """Prints what is evaluated, plays every policy on the same episodes (one key for all),
    prints the table; returns the summaries, one per policy."""
    import jax

    mode = "greedy" if args.deterministic else "sampled"
    print(f"{args.episodes} episodes per policy{where}, seed {args.seed}, max {max_steps} "
          f"steps, checkpoints {mode}")
    for source, checkpoint in zip(sources, loaded):
        print(f"{source}: {checkpoint.file} ({checkpoint.description})")
    key = jax.random.key(args.seed)
    summaries = {candidate.name: summarise(play(candidate, key)) for candidate in policies}
    for source, checkpoint in zip(sources, loaded):
        summaries[source]["checkpoint_file"] = str(checkpoint.file)
        if checkpoint.num_agents > 1:
            summaries[source]["agent"] = checkpoint.agent
    print(table(summaries))
    return summaries


def _other_env_baselines_problem(names: list[str], env_id: str) -> str | None:
    """Why the baselines `names` cannot play `env_id` (not HackMatrix), or None."""
    hackmatrix_only = [name for name in names if name not in OTHER_ENV_BASELINES]
    if hackmatrix_only:
        return (f"--baselines {hackmatrix_only[0]} plays HackMatrix only, not {env_id}: use "
                "random or none")
    return None


def _write_json(path: str | None, summaries: dict) -> None:
    if path is None:
        return
    import json
    import pathlib

    from hackmatrix.training.atomic_files import atomic_write

    text = json.dumps(summaries, indent=2) + "\n"
    atomic_write(pathlib.Path(path), lambda file: file.write(text.encode()))
    print(f"wrote {path}")

