"""`benchmark.py learn`: how well a training recipe learns, measured by how its agents PLAY.

A recipe is the trainer's config flags, given after `--`, e.g.
    benchmark.py learn --seeds 3 -- --distance-shaping potential --torso conv
and made into a config exactly as a fresh CPU run of `train_purejaxrl.py` would
(`training.cli.fresh_config`: the CPU defaults, whatever the backend, so that a recipe means the
same on every machine). Each seed (only the PRNG key differs) trains for `--total-timesteps`;
then its final params play `--eval-episodes` fresh games, sampling their actions, on the fixed
boards of `--eval-seed` (`training.evaluation.eval_key`, as the trainer's in-training
evaluation), and so do the random and exit-runner baselines, on the same boards. Learning is
judged by these games' outcomes, scored by the game's own rules, not by the training return,
which a shaped reward can inflate (pacing for distance shaping, say).

Reported per seed, then as mean and POPULATION standard deviation (ddof=0) over the seeds:
mean_return (the rules' reward), mean_stage, win_rate, mean_score, the fractions of siphon and
program actions, and the training steps per second. The SPS times every update chunk of a seed
from dispatch to its last result, without the chunk's compile, which happens once before the
first seed (the seeds share one compiled chunk: a seed is a PRNG key, not a shape). The seeds
train one after another: on CPU a vmap over them would only share the same cores.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

from hackmatrix.bench.arguments import positive_int
from hackmatrix.tools import cli as tool_cli
from hackmatrix.tools.cli import ArgumentParser
from hackmatrix.training import arguments as train_arguments
from hackmatrix.training.config import DEVICE_DEFAULTS, ConfigError

FIGURES = ("mean_return", "mean_stage", "win_rate", "mean_score", "siphon_frac", "program_frac")
BASELINES = ("random", "exit-runner")
STD_KIND = "population (ddof=0)"


def seed_list(text: str) -> list[int]:
    """Comma-separated distinct seeds, e.g. '0,1,2'."""
    seeds = [tool_cli.seed(part.strip()) for part in text.split(",")]
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"a seed appears twice in {text!r}")
    return seeds


def eval_episodes(text: str) -> int:
    value = positive_int(text)
    if value > train_arguments.MAX_EVAL_EPISODES:
        raise argparse.ArgumentTypeError(
            f"at most {train_arguments.MAX_EVAL_EPISODES}, got {value}")
    return value


def timesteps(text: str) -> int:
    """A positive whole number of steps, also written as 1e6 or 1_000_000 (as the trainer)."""
    try:
        value = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            number = 0.5
        value = int(number) if number.is_integer() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def recipe_flags(trainer_argv: list[str], total_timesteps: int | None):
    """The trainer's flags of the recipe, parsed by the trainer's own parser, with learn's
    --total-timesteps. UsageError for a bad flag, and for --seed, --total-timesteps and the
    trainer's run options (checkpoints, wandb, ...), which are no part of a recipe here."""
    parser = train_arguments.build_parser()
    args = parser.parse_args(trainer_argv)
    for dest, value in vars(args).items():
        if value == parser.get_default(dest):
            continue
        if dest == "seed":
            raise train_arguments.UsageError("--seed: the seeds are learn's --seeds or "
                                             "--seed-list, before --")
        if dest == "total_timesteps":
            raise train_arguments.UsageError("--total-timesteps is learn's own: give it "
                                             "before --")
        if dest not in train_arguments.CONFIG_FIELDS and dest != "anneal_lr":
            raise train_arguments.UsageError(
                f"--{dest.replace('_', '-')} is a run option of the trainer, not part of a "
                "recipe: give only the trainer's config flags after --")
    if total_timesteps is not None:
        args = parser.parse_args([*trainer_argv, "--total-timesteps", str(total_timesteps)])
    return args


def recipe_config(flags):
    """The config a fresh CPU run of the trainer with `flags` trains (ConfigError if invalid)."""
    import jax

    from hackmatrix.training import cli as train_cli
    from hackmatrix.training import devices
    from hackmatrix.training.config import validate
    config, _, _ = train_cli.fresh_config(flags, "cpu", jax.local_device_count())
    validate(config)
    if (error := devices.missing_devices_error(config.num_devices)) is not None:
        raise ConfigError(error)
    return config


def train_seeds(config, seeds: list[int], say):
    """Trains one run per seed; returns (compile seconds, the network, [(params, sps)])."""
    import jax
    import jax.numpy as jnp

    from hackmatrix import xla_options
    from hackmatrix.bench.timing import lower_and_compile
    from hackmatrix.training import cli as train_cli
    from hackmatrix.training import startup, trainer as ppo
    env, env_params = train_cli.make_env()
    env_params = train_cli.training_env_params(env_params, config)
    trainer = ppo.make_trainer(config, env, env_params)
    init = jax.jit(trainer.init, out_shardings=trainer.runner_sharding,
                   compiler_options=xla_options.compiler_options())
    schedule = ppo.make_schedule(config)
    chunk, compile_s, trained = None, 0.0, []
    for seed in seeds:
        runner = jax.device_put(startup.without_weak_types(init(jax.random.PRNGKey(seed))),
                                trainer.runner_sharding)
        if chunk is None:  # one compile serves every seed
            chunk, trace_s, xla_s = lower_and_compile(trainer.run_chunk, runner, jnp.int32(0),
                                                      schedule)
            compile_s = trace_s + xla_s
            say(f"[compile] the update chunk: {compile_s:.1f}s, once for all seeds")
        jax.block_until_ready(runner)
        start, done = time.perf_counter(), 0
        while done < config.num_updates:
            active = min(config.updates_per_chunk, config.num_updates - done)
            runner, _ = chunk(runner, jnp.int32(active), schedule)
            done += active
        jax.block_until_ready(runner)
        seconds = time.perf_counter() - start
        sps = done * config.batch_size / seconds
        say(f"[train] seed {seed}: {done} updates, {done * config.batch_size} steps in "
            f"{seconds:.1f}s ({sps:,.0f} steps/s)")
        # On the host: params on the trainer's mesh would carry its sharding into the games'
        # arrays, and the episode step would compile again for them and again for the baselines.
        trained.append((jax.device_get(runner.train.params), sps))
    return compile_s, trainer.network, trained


def play(policy, eval_seed: int, num_episodes: int, max_steps: int) -> dict:
    """The FIGURES of `policy` on the boards of `eval_seed`."""
    from hackmatrix.tools import evaluation as episodes
    from hackmatrix.training.evaluation import eval_key
    summary = episodes.summarise(episodes.run_episodes(policy, eval_key(eval_seed),
                                                       num_episodes, max_steps))
    fractions = summary["action_fractions"]
    return {"mean_return": summary["mean_return"], "mean_stage": summary["mean_stage"],
            "win_rate": summary["win_rate"], "mean_score": summary["mean_score"],
            "siphon_frac": fractions["siphon"], "program_frac": fractions["program"]}


def table(report: dict) -> list[str]:
    """The report as text: a row per seed, their mean ± std, a row per baseline."""
    names = (*FIGURES, "sps")

    def number(name, value):
        return f"{value:,.0f}" if name == "sps" else f"{value:.3f}"

    def row(label, cells):
        return f"{label:<12}" + "".join(f" {cell:>17}" for cell in cells)

    lines = [row("policy", names)]
    lines += [row(f"seed {r['seed']}", [number(name, r[name]) for name in names])
              for r in report["per_seed"]]
    lines.append(row("mean ± std", [f"{number(name, report['mean'][name])} ± "
                                    f"{number(name, report['std'][name])}" for name in names]))
    lines += [row(name, [number(figure, r[figure]) for figure in FIGURES])
              for name, r in report["baselines"].items()]
    return lines


def main(argv=None) -> int:
    parser = ArgumentParser(prog="benchmark.py learn", description=__doc__,
                            usage="benchmark.py learn [options] [-- TRAINER_CONFIG_FLAGS ...]")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=positive_int, default=3, metavar="N",
                       help="train seeds 0..N-1 (default 3)")
    seeds.add_argument("--seed-list", type=seed_list, metavar="S,S,...",
                       help="train these seeds instead, e.g. 0,1,2")
    parser.add_argument("--total-timesteps", type=timesteps, metavar="STEPS",
                        help="env steps per seed, e.g. 1e6 (default: the trainer's CPU default, "
                             f"{DEVICE_DEFAULTS['cpu']['total_timesteps']:,})")
    parser.add_argument("--eval-episodes", type=eval_episodes, default=256, metavar="N",
                        help="games each policy plays (default 256)")
    parser.add_argument("--eval-seed", type=tool_cli.seed, default=0,
                        help="seed of the evaluation boards, the same for every policy "
                             "(default 0)")
    parser.add_argument("--max-steps", type=positive_int, default=2000, metavar="N",
                        help="steps after which a game is cut off (default 2000)")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    argv = sys.argv[1:] if argv is None else list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    trainer_argv = argv[split + 1:]
    try:
        if args.json is not None:
            tool_cli.check_output_file(args.json, "--json")
        flags = recipe_flags(trainer_argv, args.total_timesteps)
        from hackmatrix.training import devices
        devices.request_cpu_devices(flags.num_devices or 1)  # before JAX starts its backends
        tool_cli.start_jax(parser.prog)
        config = recipe_config(flags)
    except (train_arguments.UsageError, ConfigError, tool_cli.ToolError) as error:
        parser.error(f"{'after --: ' if isinstance(error, train_arguments.UsageError) else ''}"
                     f"{error}")

    from hackmatrix.tools import baselines
    from hackmatrix.tools import evaluation as episodes
    from hackmatrix.tools.policy import network_act
    seed_values = args.seed_list or list(range(args.seeds))
    print(f"learn: seeds {seed_values}, {config.num_updates} updates of {config.batch_size} "
          f"steps ({config.num_envs} envs x {config.num_steps}) per seed; trainer flags: "
          f"{' '.join(trainer_argv) or '(none)'}", flush=True)
    compile_s, network, trained = train_seeds(config, seed_values, print)
    act = network_act(network, False)
    per_seed = [{"seed": seed, **play(episodes.Policy(f"seed {seed}", act, params),
                                      args.eval_seed, args.eval_episodes, args.max_steps),
                 "sps": sps}
                for seed, (params, sps) in zip(seed_values, trained, strict=True)]
    names = (*FIGURES, "sps")
    report = {
        "seeds": seed_values, "trainer_flags": trainer_argv,
        "config": {k: v for k, v in config.to_dict().items() if k != "seed"},
        "num_updates": config.num_updates, "timesteps_per_seed": config.num_updates
        * config.batch_size, "compile_s": compile_s,
        "eval": {"episodes": args.eval_episodes, "eval_seed": args.eval_seed,
                 "max_steps": args.max_steps, "actions": "sampled"},
        "per_seed": per_seed,
        "mean": {name: float(np.mean([row[name] for row in per_seed])) for name in names},
        "std": {name: float(np.std([row[name] for row in per_seed])) for name in names},
        "std_kind": STD_KIND,
        "baselines": {name: play(baselines.baseline(name), args.eval_seed, args.eval_episodes,
                                 args.max_steps) for name in BASELINES},
    }
    print(f"[play] {args.eval_episodes} games per policy "
          f"on the boards of --eval-seed {args.eval_seed}, at most {args.max_steps} steps, "
          f"sampled actions; std over seeds: {STD_KIND}")
    for line in table(report):
        print(line)
    if args.json is not None:
        from hackmatrix.training.atomic_files import atomic_write
        text = json.dumps(report, indent=2) + "\n"
        atomic_write(pathlib.Path(args.json), lambda file: file.write(text.encode()))
    return 0
