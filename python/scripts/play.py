#!/usr/bin/env python
"""Play HackMatrix in the terminal, one command per line (so sessions can be scripted).

Commands:
  w a s d            move/attack up, left, down, right (up = towards row 5, the top row);
                     also up / down / left / right, or the arrow keys followed by Enter
  x, siphon          siphon
  wait               the WAIT program
  <program name>     any program by name, case-insensitive (warp, siph+, anti-v, d_bom, ...)
  <number>           any action index 0-27 (programs are 5-27)
  q, quit            leave

Only actions in the shown list of valid actions are played; anything else is refused with a
message, since the game would end the episode on an invalid action (rules §4.4). The session ends
when the game ends (death, victory), on `q`, or at the end of the input.
"""

import sys

from hackmatrix.tools import cli

EXIT_CODES_HELP = """exit codes:
  0  ok: quit, end of input or game over
  2  other failure
  3  bad arguments, or a malformed scenario file (invalid JSON or an invalid field)
  6  the scenario file cannot be read"""

DIRECTION_COMMANDS = {
    "w": 0, "up": 0, "\x1b[a": 0,
    "s": 1, "down": 1, "\x1b[b": 1,
    "a": 2, "left": 2, "\x1b[d": 2,
    "d": 3, "right": 3, "\x1b[c": 3,
    "x": 4, "siphon": 4,
}
QUIT_COMMANDS = {"q", "quit", "exit"}


def parse_command(text: str):
    """The action index for a command, "quit", or None if the command is not understood."""
    from hackmatrix.game import constants as C
    from hackmatrix.game import scenario

    command = text.strip().lower()
    if command in QUIT_COMMANDS:
        return "quit"
    if command in DIRECTION_COMMANDS:
        return DIRECTION_COMMANDS[command]
    if command.isdigit():
        action = int(command)
        return action if 0 <= action < C.NUM_ACTIONS else None
    program = scenario.program_from_name(command) if command else None
    return None if program is None else C.FIRST_PROGRAM_ACTION + program


def describe_valid(mask) -> str:
    from hackmatrix.game import constants as C

    return ", ".join(f"{action} {C.ACTION_NAMES[action]}" for action in range(C.NUM_ACTIONS)
                     if mask[action])


def describe_reward(reward, components) -> str:
    """The reward and its non-zero components, in the rules' table order (§14.1)."""
    from hackmatrix.game import constants as C

    nonzero = [f"{name} {float(components[name]):+.4f}" for name in C.REWARD_COMPONENTS
               if float(components[name]) != 0.0]
    return f"Reward {float(reward):+.4f}" + (f" ({', '.join(nonzero)})" if nonzero else "")


def read_action(mask):
    """The next valid action typed on stdin, "quit", or None at the end of the input."""
    while True:
        print("> ", end="", flush=True)
        line = sys.stdin.readline()
        if not line:
            print()
            return None
        action = parse_command(line)
        if action == "quit" or (action is not None and mask[action]):
            return action
        if action is None:
            print(f"Unknown command {line.strip()!r}: use w/a/s/d, x, a program name, "
                  f"an action number or q")
        else:
            print(f"Action {action} is not valid now")


def play(state, key, color: bool) -> None:
    import jax
    import numpy as np

    from hackmatrix import game, xla_options

    options = xla_options.compiler_options()
    step = jax.jit(game.step, compiler_options=options)
    valid_actions = jax.jit(game.valid_actions, compiler_options=options)

    while True:
        print(game.render(state, color=color))
        mask = np.asarray(valid_actions(state))
        print(f"Valid actions: {describe_valid(mask)}")
        action = read_action(mask)
        if action is None or action == "quit":
            return

        key, step_key = jax.random.split(key)
        state, _, reward, done, info = step(step_key, state, action)
        print(describe_reward(reward, info["reward_components"]))
        if bool(done):
            print(game.render(state, color=color))
            if bool(info["won"]):
                print(f"You won! Final score {int(info['score'])}.")
            elif bool(info["death"]):
                print(f"You died on stage {int(info['stage'])}.")
            else:
                print("Invalid action: the episode is over.")
            return


def main(argv=None) -> int:
    parser = cli.ArgumentParser(prog="play.py", description=__doc__, epilog=EXIT_CODES_HELP)
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--scenario", metavar="FILE.json",
                        help="start from a scenario (rules Appendix A) instead of a new game")
    parser.add_argument("--no-color", action="store_true",
                        help="plain text (colour is used only when stdout is a terminal)")
    args = parser.parse_args(argv)

    def body():
        import jax

        from hackmatrix import game

        key = jax.random.PRNGKey(args.seed)
        key, reset_key = jax.random.split(key)
        if args.scenario:
            state = cli.load_scenario(args.scenario)
        else:
            state, _ = game.reset(reset_key)
        play(state, key, color=sys.stdout.isatty() and not args.no_color)

    return cli.run_main(parser.prog, body)


if __name__ == "__main__":
    sys.exit(main())
