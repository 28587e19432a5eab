"""Watch a trained agent play HackMatrix in the terminal; optionally save an animated GIF.

CHECKPOINT is a full checkpoint_*.pkl, a params .npz (final_params.npz too) or a run directory;
--latest takes the newest of those files under --checkpoint-dir instead, looking inside the
run folders. The network architecture comes from the checkpoint (inferred from the parameter
shapes for a bare .npz). A run trained with --num-seeds K holds K agents: --agent I picks one
(default 0).

Each step shows the board before the action, the value estimate and the top valid actions with
their probabilities (the policy restricted to valid actions), the action taken and the reward
with its non-zero components. With --step the board comes first, then each Enter shows the
action taken on it and the board it leads to; q + Enter stops with a summary of the episode so
far. Invalid actions are never taken: argmax and sampling both respect the action mask, and a
start where no action is valid (a scenario can wall the player in) ends the episode there. The GIF
has one frame for each episode's start plus one per step; its directory must exist. Ctrl-C (or
SIGTERM) writes the GIF of the frames so far, then exits 7.

A run trained on another env (`--env` of the trainer, e.g. a gymnax id) plays that env, which
its checkpoint records, and shows one line per step, since such an env has no renderer here:
the step number, the observation's values (rounded), the value estimate, the action with its
probability and the reward; --delay defaults to 0 there. --gif and --scenario draw and start
HackMatrix's board only (exit 3 for another env). --env ID names the env of a params file that
records none (one copied out of its run).
"""

import sys

from hackmatrix.tools import cli, policy_env

HACKMATRIX_DELAY = 0.5  # seconds: a board is read slower than a line


def main(argv=None) -> int:
    parser = cli.ArgumentParser(
        prog="watch_jax_agent.py", description=__doc__,
        epilog=cli.exit_codes_help(
            bad_arguments="bad arguments, a --gif file that cannot be written, or a malformed "
                          "scenario file",
            missing_input="missing or incompatible checkpoint or run directory, or an "
                          "unreadable scenario file"))
    parser.add_argument("checkpoint", nargs="?", metavar="CHECKPOINT", type=cli.input_path,
                        help=".pkl checkpoint, params .npz or run directory")
    parser.add_argument("--latest", action="store_true",
                        help="watch the newest policy file (checkpoint .pkl or params .npz) under "
                             "--checkpoint-dir")
    parser.add_argument("--checkpoint-dir", default="checkpoints",
                        help="where --latest looks, run folders included (default: checkpoints)")
    parser.add_argument("--agent", type=cli.agent, default=0, metavar="I", help=cli.AGENT_HELP)
    parser.add_argument("--episodes", type=int, default=1, metavar="N",
                        help=f"episodes (default 1, at most {cli.MAX_WATCHED_EPISODES:,})")
    parser.add_argument("--deterministic", action="store_true",
                        help="take the most probable valid action (default: sample)")
    parser.add_argument("--delay", type=cli.seconds, metavar="SECONDS",
                        help=f"pause between frames, 0 to 600 (default {HACKMATRIX_DELAY}; 0 for "
                             "another env's one-line steps); also each GIF frame's duration, at "
                             "least 0.3")
    parser.add_argument("--step", action="store_true",
                        help="advance one step per Enter; q + Enter stops")
    parser.add_argument("--seed", type=cli.seed, default=0,
                        help="seed of the games and of sampling (default 0)")
    parser.add_argument("--scenario", metavar="FILE.json",
                        help="start every episode from this exact state (scenario JSON)")
    parser.add_argument("--max-steps", type=int, default=500, metavar="N",
                        help="end an episode after this many steps (default 500, at most "
                             f"{cli.MAX_EPISODE_STEPS:,})")
    parser.add_argument("--no-color", action="store_true",
                        help="plain text: no ANSI colours and no screen clearing")
    parser.add_argument("--top", type=int, default=5, metavar="K",
                        help="how many of the most probable actions to show (default 5)")
    parser.add_argument("--gif", metavar="FILE",
                        help="also write the episodes as an animated GIF (GIF whatever the "
                             "extension; written on Ctrl-C too, with the frames so far); "
                             "--episodes x (--max-steps + 1) frames at most, and at most "
                             f"{cli.MAX_GIF_FRAMES:,}, held in memory until written")
    parser.add_argument("--env", metavar="ID",
                        help="the env of the checkpoint: needed only for a params file that "
                             "records none (default: the checkpoint's own)")
    args = parser.parse_args(argv)
    if args.env is not None and not (args.env.strip() and args.env.isprintable()):
        parser.error(f"--env must be an env id, got {args.env!r}")
    if (args.checkpoint is None) == (not args.latest):
        parser.error("give either CHECKPOINT or --latest")
    cli.require_at_least_one(parser, {"--episodes": args.episodes,
                                      "--max-steps": args.max_steps, "--top": args.top})
    cli.require_at_most(parser, {"--episodes": (args.episodes, cli.MAX_WATCHED_EPISODES),
                                 "--max-steps": (args.max_steps, cli.MAX_EPISODE_STEPS)})
    if args.gif is not None and args.episodes * (args.max_steps + 1) > cli.MAX_GIF_FRAMES:
        parser.error(f"--gif with --episodes {args.episodes} and --max-steps {args.max_steps} "
                     f"may hold {args.episodes * (args.max_steps + 1):,} frames in memory, "
                     f"over {cli.MAX_GIF_FRAMES:,}: fewer episodes or steps")

    def body():
        if args.gif is not None:
            cli.check_output_file(args.gif, "--gif", inputs=(args.checkpoint, args.scenario))

        cli.start_jax(parser.prog)
        from hackmatrix.tools import policy, viewer

        start_state = cli.load_scenario(args.scenario) if args.scenario is not None else None
        loaded = policy.load_policy(
            args.checkpoint or policy.latest_checkpoint(args.checkpoint_dir), env_id=args.env,
            agent=args.agent)
        if loaded.env_id != policy_env.HACKMATRIX:
            _watch_other_env(loaded, args)
            return
        delay = HACKMATRIX_DELAY if args.delay is None else args.delay

        # Escape sequences only for a terminal and never with --no-color; in step mode the
        # board scrolls so that the previous step stays readable above the prompt.
        escapes = sys.stdout.isatty() and not args.no_color
        mode = "argmax" if args.deterministic else "sampling"
        print(f"watching {loaded.file} ({loaded.description}, {mode})")
        options = viewer.ViewerOptions(
            episodes=args.episodes, deterministic=args.deterministic, delay=delay,
            step_mode=args.step, seed=args.seed, scenario=start_state, max_steps=args.max_steps,
            color=escapes, clear_screen=escapes and not args.step, gif_path=args.gif,
            top_k=args.top)
        viewer.watch(loaded, options)

    return cli.run_main(parser.prog, body)


def _watch_other_env(loaded, args) -> None:
    """The text viewer of an env without a board (exit 3 for the board's own options)."""
    from hackmatrix.tools import env_viewer

    for flag, value, what in (("--gif", args.gif, "draws"),
                              ("--scenario", args.scenario, "starts from")):
        if value is not None:
            raise cli.ToolError(f"{flag} {what} HackMatrix's board only: {loaded.file} plays "
                                f"{loaded.env_id}", cli.EXIT_BAD_ARGUMENTS)
    env = policy_env.make_tool_env(loaded.env_id)
    mode = "argmax" if args.deterministic else "sampling"
    print(f"watching {loaded.file} ({loaded.description}, {loaded.env_id}, {mode})")
    env_viewer.watch_env(loaded, env, env_viewer.EnvViewerOptions(
        episodes=args.episodes, deterministic=args.deterministic,
        delay=0.0 if args.delay is None else args.delay, step_mode=args.step, seed=args.seed,
        max_steps=args.max_steps))

