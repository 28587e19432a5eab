"""Play HackMatrix in the terminal, one command per line (so sessions can be scripted).

Commands:
  w a s d            move/attack up, left, down, right (up = towards row 5, the top row);
                     also up / down / left / right, or the arrow keys followed by Enter
  x, siphon          siphon
  z, wait            the WAIT program
  <program name>     any program by name, case-insensitive (warp, siph+, anti-v, d_bom, ...)
  <number>           any action index 0-27 (programs are 5-27)
  save FILE.json     save the game as it is now as a scenario file (specs/game-rules.md §10;
                     the UNDO history is not saved) and go on playing; replay it with --scenario
  help, h, ?         this list of commands
  q, quit            leave (so do Ctrl-C, exit code 7, and the end of the input)

Only actions in the shown list of valid actions are played; anything else is refused with a
message saying why (not owned, its cost, nothing to apply it to, a block in the way, ...), since
the game would end the episode on an invalid action (specs/game-rules.md §2, "The valid-action
mask"). Empty lines are ignored. The session ends when the game ends (death, victory, or a
scenario where no action is valid), on `q`, or at the end of the input.
"""

import os
import re
import shlex
import sys

from hackmatrix.messages import shown
from hackmatrix.tools import cli

# One key (or a word) for each move, siphon and WAIT.
KEY_COMMANDS = {
    "w": 0, "up": 0, "\x1b[a": 0,
    "s": 1, "down": 1, "\x1b[b": 1,
    "a": 2, "left": 2, "\x1b[d": 2,
    "d": 3, "right": 3, "\x1b[c": 3,
    "x": 4, "siphon": 4,
    "z": 10,  # WAIT, constants.ACTION_WAIT: one key, like x for siphon
}
QUIT_COMMANDS = {"q", "quit", "exit"}
QUIT = "quit"
HELP_COMMANDS = {"help", "?", "h"}
HELP = "help"
# The "Commands:" list of the docstring, shown by `help` (empty under `python -OO`).
COMMANDS_HELP = (__doc__ or "").partition("\n\nOnly actions")[0].partition("\n\n")[2]


class CommandError(ValueError):
    """A line that names no action; the message says so to the player."""


class Save(str):
    """`save FILE`: the file to save the current state to."""


def parse_command(text: str):
    """The action index for a command, QUIT, HELP, a Save, or None for an empty line;
    CommandError for anything else."""
    from hackmatrix.game import constants as C
    from hackmatrix.game import scenario

    command = text.strip().lower()
    if not command:
        return None
    if command.split()[0] == "save":
        path = text.strip()[len("save"):].strip()
        if len(path) >= 2 and path[0] == path[-1] and path[0] in "'\"":
            path = path[1:-1]  # save "my game.json"
        if not path:
            raise CommandError("save needs a file name: save FILE.json")
        if path.endswith(("/", os.sep)):
            raise CommandError(f"save {path}: that names a directory; give a file name in it")
        return Save(os.path.expanduser(path))
    if command in QUIT_COMMANDS:
        return QUIT
    if command in HELP_COMMANDS:
        return HELP
    if command in KEY_COMMANDS:
        return KEY_COMMANDS[command]
    if re.fullmatch(r"[+-]?[0-9]+", command):  # not str.isdigit: it takes "²", and "--5"
        # Python will not read a number of over 4300 digits; none of those is an action.
        number = int(command) if len(command) <= 60 else None
        if number is not None and 0 <= number < C.NUM_ACTIONS:
            return number
        raise CommandError(f"No action {shown(command) if number is None else number}: action "
                           f"numbers are 0-{C.NUM_ACTIONS - 1}")
    program = scenario.program_from_name(command)
    if program is None:
        raise CommandError(f"Unknown command {shown(text.strip())}: use w/a/s/d, x, z, a program "
                           f"name, an action number (0-{C.NUM_ACTIONS - 1}), save FILE.json or "
                           "q; help lists them")
    return C.FIRST_PROGRAM_ACTION + program


def _program_reasons():
    """Why an owned program is not applicable (rules §5, "Applicable when"), by program index.
    WAIT, STEP and SIPH+ always apply; EXCH applies from 4 credits, exactly its cost, so its
    cost already says why."""
    from hackmatrix.game import constants as C

    return {
        C.PUSH: "there is no enemy", C.PULL: "there is no enemy",
        C.CRASH: "no block, enemy or transmission is in the 8 cells around you",
        C.WARP: "there is no enemy or transmission", C.POLY: "there is no enemy",
        C.DEBUG: "no enemy stands on a block", C.ROW: "no enemy is in your row",
        C.COL: "no enemy is in your column", C.UNDO: "there is nothing to undo yet",
        C.SHOW: "SHOW is already active",
        C.RESET: "your hp is already 3", C.CALM: "CALM is already active",
        C.D_BOM: "there is no daemon", C.DELAY: "there is no transmission",
        C.ANTI_V: "there is no virus", C.SCORE: "this is the last stage",
        C.REDUC: "no unsiphoned block has a spawn count above 0",
        C.ATK_PLUS: "it was already used twice this stage", C.HACK: "no cell is siphoned yet",
    }


def why_invalid(state, action: int, program_applicable) -> str:
    """`<action> is not valid now: <reason>` for an action that the mask refuses (rules §4):
    the direction's cell, the missing data siphon, or for a program ownership, cost and
    applicability (`program_applicable`: bool[23] of this state)."""
    from hackmatrix.game import constants as C

    core = state.core
    name = C.ACTION_NAMES[action]
    if action < C.ACTION_SIPHON:
        row, col = (int(core.player_row) + int(C.DIRECTION_DELTAS[action][0]),
                    int(core.player_col) + int(C.DIRECTION_DELTAS[action][1]))
        on_board = 0 <= row < C.BOARD_SIZE and 0 <= col < C.BOARD_SIZE
        return f"{name} is not valid now: " + (
            "a block is in the way" if on_board else "the board ends there")
    if action == C.ACTION_SIPHON:
        return f"{name} is not valid now: you have no data siphons"
    program = action - C.FIRST_PROGRAM_ACTION
    if not bool(core.owned[program]):
        return f"{name} is not valid now: you do not own it"
    reasons = []
    credits, energy = int(core.credits), int(core.energy)
    credit_cost, energy_cost = (int(C.PROGRAM_CREDIT_COST[program]),
                                int(C.PROGRAM_ENERGY_COST[program]))
    if credits < credit_cost:
        reasons.append(f"it costs {credit_cost} credits, you have {credits}")
    if energy < energy_cost:
        reasons.append(f"it costs {energy_cost} energy, you have {energy}")
    not_applicable_reason = _program_reasons().get(program)  # None for EXCH: its cost says it
    if not bool(program_applicable[program]) and not_applicable_reason:
        reasons.append(not_applicable_reason)
    return f"{name} is not valid now: {'; '.join(reasons)}"


def describe_valid(mask) -> str:
    from hackmatrix.game import constants as C

    return ", ".join(f"{action} {C.ACTION_NAMES[action]}" for action in range(C.NUM_ACTIONS)
                     if mask[action]) or "none"


def describe_reward(reward, components) -> str:
    """The reward and its non-zero components, in the rules' table order (§14.1)."""
    from hackmatrix.game import constants as C

    nonzero = [f"{name} {float(components[name]):+.4f}" for name in C.REWARD_COMPONENTS
               if float(components[name]) != 0.0]
    return f"Reward {float(reward):+.4f}" + (f" ({', '.join(nonzero)})" if nonzero else "")


def save_scenario(state, path: str, inputs=()) -> str:
    """Writes `state` to `path` as a scenario file (atomically); the line to show the player.
    A path that cannot be written is reported, not fatal: the game goes on."""
    import json

    from hackmatrix.game import scenario
    from hackmatrix.training.atomic_files import atomic_write

    try:
        output = cli.check_output_file(path, "save", inputs=inputs)
        text = json.dumps(scenario.to_dict(state), indent=2) + "\n"
        atomic_write(output, lambda f: f.write(text.encode()))
    except cli.ToolError as error:
        return f"Not saved: {error}"
    except OSError as error:
        return f"Not saved: {path}: {error.strerror}"
    return f"Saved to {path} (play it from here: play.py --scenario {shlex.quote(path)})"


def read_action(mask, explain_invalid, save):
    """The next valid action typed on stdin, QUIT, or None at the end of the input. Empty lines
    are skipped; anything else that is not a valid action is explained (`explain_invalid(action)`
    for a known action) and the next line is read; `save FILE` prints `save(FILE)`."""
    while True:
        print("> ", end="", flush=True)
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            print()  # end the prompt's line; the CLI then reports the interrupt (exit 7)
            raise
        if not line:
            print()
            return None
        try:
            action = parse_command(line)
        except CommandError as error:
            print(error)
            continue
        if action is None:
            continue
        if isinstance(action, Save):
            print(save(action))
            continue
        if action == HELP:
            print(COMMANDS_HELP)
            continue
        if action == QUIT or mask[action]:
            return action
        print(explain_invalid(action))


def play(state, key, reset_key, color: bool, scenario_path=None) -> None:
    """Plays from `state`, or from a new game drawn with `reset_key` when `state` is None."""
    import jax
    import numpy as np

    from hackmatrix import game, xla_options
    from hackmatrix.game import action_mask
    from hackmatrix.tools import compile_ahead, report

    options = xla_options.compiler_options()
    reset = jax.jit(game.reset, compiler_options=options)
    step = jax.jit(game.step, compiler_options=options)
    valid_actions = jax.jit(game.valid_actions, compiler_options=options)
    program_applicable = jax.jit(action_mask.program_applicable, compiler_options=options)
    # Compiled before the first board, not after the first key: a silent pause of several
    # seconds (without a warm compilation cache) reads as a hang. The reset is jitted too: run
    # op by op it compiled some 300 tiny programs.
    print("compiling the game...", flush=True)
    shapes = jax.eval_shape(reset, reset_key)[0] if state is None else state
    compile_ahead.compile_ahead(
        [(step, (key, shapes, 0))] + ([(reset, (reset_key,))] if state is None else [])
        + [(valid_actions, (shapes,)), (program_applicable, (shapes,))])
    if state is None:
        state, _ = reset(reset_key)

    while True:
        print(game.render(state, color=color, player_view=True))
        mask = np.asarray(valid_actions(state))
        print(f"Valid actions: {describe_valid(mask)}")
        if not mask.any():
            # A scenario can wall the player in with nothing to spend; any action would then
            # only end the episode as invalid, so say so instead of prompting forever.
            print(f"No action is valid: {report.NO_VALID_ACTION_REASON}. The game cannot go on.")
            return
        action = read_action(
            mask, lambda invalid: why_invalid(state, invalid, np.asarray(program_applicable(state))),
            lambda path: save_scenario(state, path, inputs=(scenario_path,)))
        if action is None or action == QUIT:
            return

        key, step_key = jax.random.split(key)
        state, _, reward, done, info = step(step_key, state, action)
        print(describe_reward(reward, info["reward_components"]))
        if bool(done):
            print(game.render(state, color=color, player_view=True))
            if bool(info["won"]):
                print(f"You won! Final score {int(info['score'])}.")
            elif bool(info["death"]):
                print(f"You died on stage {int(info['stage'])}.")
            else:
                print("Invalid action: the episode is over.")
            return


def main(argv=None) -> int:
    parser = cli.ArgumentParser(
        prog="play.py", description=__doc__,
        epilog=cli.exit_codes_help(
            ok="ok: quit, end of input or game over",
            bad_arguments="bad arguments, or a malformed scenario file (invalid JSON or an "
                          "invalid field)",
            missing_input="the scenario file cannot be read"))
    parser.add_argument("--seed", type=cli.seed, default=0, help="random seed (default 0)")
    parser.add_argument("--scenario", metavar="FILE.json",
                        help="start from a scenario file (specs/game-rules.md §10) instead of "
                             "a new game")
    parser.add_argument("--no-color", action="store_true",
                        help="plain text (colour is used only when stdout is a terminal)")
    args = parser.parse_args(argv)

    def body():
        cli.start_jax(parser.prog)
        import jax

        key = jax.random.PRNGKey(args.seed)
        key, reset_key = jax.random.split(key)
        state = cli.load_scenario(args.scenario) if args.scenario is not None else None
        # A byte the encoding cannot read is kept as Python keeps it in file names (so that
        # `save` can name any file), not a crash: it makes an unknown command otherwise.
        if getattr(sys.stdin, "errors", None) == "strict" and hasattr(sys.stdin, "reconfigure"):
            sys.stdin.reconfigure(errors="surrogateescape")
        play(state, key, reset_key, color=sys.stdout.isatty() and not args.no_color,
             scenario_path=args.scenario)

    return cli.run_main(parser.prog, body)

