"""`benchmark.py scale`: training SPS against the number of devices that share the envs.

Each device count runs in a fresh process, so that JAX starts with that many devices: the same
total env count (split evenly over the devices), the same rollout length and the same update
(minibatches and epochs fixed for every count), timed as `benchmark.py train` times the real
training (`bench/train.py`: the median of the timed chunks, after the compile and a first
update). One line per count: its SPS, that SPS over the SPS of the fewest devices measured, and
the compile time.

On CPU the devices are simulated: the process starts with JAX_NUM_CPU_DEVICES set to the count,
and every simulated device runs on the same cores. There the figures measure what the
collectives and the split cost, not how training scales. On a GPU or TPU host the devices are
real: counts above the devices JAX sees are skipped, with a note.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

from hackmatrix.bench.arguments import (add_count_list, add_update_shape, env_count,
                                        network_options, positive_int)
from hackmatrix.tools import cli as tool_cli
from hackmatrix.tools.cli import ArgumentParser
from hackmatrix.training.devices import MAX_CPU_DEVICES

DEFAULT_DEVICES = (1, 2, 4, 8)
DEFAULT_NUM_ENVS = 256
CPU_NOTE = ("on CPU the devices are simulated (JAX_NUM_CPU_DEVICES) and share the same cores: "
            "there the figures measure the overhead of the collectives, not scaling")

# The child process: the CPU compile mode first, as every command-line program starts
# (shell/launch.py), then one device count measured by `measure_one`.
_CHILD = ("import sys; from hackmatrix.shell import launch; launch.start_process(); "
          "from hackmatrix.bench import scale; launch.exit_process(scale.measure_one(sys.argv[1]))")


def _configs(args, explicit: dict) -> dict:
    """{device count: its TrainConfig}: every count with the same minibatches and epochs (those
    auto-scaled for the largest count, unless given), or a usage error."""
    from hackmatrix.bench.train import benchmark_config
    from hackmatrix.training.config import ConfigError
    counts = args.devices
    for count in counts:
        if args.num_envs % count:
            raise ConfigError(f"--num-envs {args.num_envs} is not divisible by {count} "
                              "(--devices): each device steps an equal share of the envs")
    largest = benchmark_config(args.num_envs, args.num_steps, args.hidden_dim, args.num_layers,
                               args.updates, counts[-1], explicit)
    fixed = {**explicit, "num_minibatches": largest.num_minibatches,
             "update_epochs": largest.update_epochs}
    return {count: benchmark_config(args.num_envs, args.num_steps, args.hidden_dim,
                                    args.num_layers, args.updates, count, fixed)
            for count in counts}


def _child_environment(count: int) -> dict:
    """This process's environment, with JAX starting `count` CPU devices (JAX_NUM_CPU_DEVICES
    wins over XLA_FLAGS' --xla_force_host_platform_device_count) and this package importable."""
    package_root = str(pathlib.Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "JAX_NUM_CPU_DEVICES": str(count),
            "PYTHONPATH": package_root if not path else f"{package_root}{os.pathsep}{path}"}


def run_count(spec: dict) -> dict:
    """Measures `spec["devices"]` devices in a fresh process; its result (see `measure_one`).
    The child's stderr (warnings, its error line) goes to this process's stderr."""
    count = spec["devices"]
    with tempfile.TemporaryDirectory(prefix="hackmatrix-scale-") as folder:
        result_path = pathlib.Path(folder) / "result.json"
        spec = {**spec, "result": str(result_path)}
        completed = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)],
                                   env=_child_environment(count), stdout=subprocess.DEVNULL)
        if completed.returncode == tool_cli.EXIT_INTERRUPTED:
            raise KeyboardInterrupt
        if completed.returncode != 0 or not result_path.is_file():
            raise tool_cli.ToolError(f"the run with {count} device(s) failed (exit "
                                     f"{completed.returncode}; its error is above)")
        return json.loads(result_path.read_text())


def measure_one(spec_text: str) -> int:
    """In the child process: measures one device count and writes its result as JSON to
    spec["result"]. Returns the exit code (an error is one line on stderr)."""
    spec = json.loads(spec_text)

    def body():
        import jax

        from hackmatrix import xla_options
        from hackmatrix.bench import train as train_benchmark
        from hackmatrix.envs.hackmatrix_env import HackMatrixTrainingEnv
        from hackmatrix.shell import jax_backend
        from hackmatrix.training import devices
        if not spec["use_cache"]:
            jax.config.update("jax_enable_compilation_cache", False)
        backend = jax_backend.start()
        count = spec["devices"]
        result = {"devices": count, "backend": backend,
                  "cpu_compile": xla_options.cpu_compile_mode(backend),
                  "available": jax.local_device_count(),
                  "device_kind": jax.local_devices()[0].device_kind}
        skipped = devices.missing_devices_error(count)
        if skipped is not None:
            result["skipped"] = skipped.replace("--num-devices ", "", 1)
        else:
            config = train_benchmark.benchmark_config(
                spec["num_envs"], spec["num_steps"], spec["hidden_dim"], spec["num_layers"],
                spec["updates"], count, spec["explicit"])
            env = HackMatrixTrainingEnv()
            [[run]] = train_benchmark.measure([config], env, env.default_params,
                                              spec["repeats"])
            result.update(run)
        pathlib.Path(spec["result"]).write_text(json.dumps(result))

    return tool_cli.run_main(f"benchmark.py scale ({spec['devices']} devices)", body)


def main(argv=None) -> int:
    parser = ArgumentParser(prog="benchmark.py scale", description=__doc__)
    add_count_list(parser, "--devices", list(DEFAULT_DEVICES),
                   "device counts, each measured in a fresh process", maximum=MAX_CPU_DEVICES)
    parser.add_argument("--num-envs", type=env_count, default=DEFAULT_NUM_ENVS,
                        help=f"envs in all, split evenly over the devices: divisible by every "
                             f"count (default {DEFAULT_NUM_ENVS})")
    add_update_shape(parser)
    parser.add_argument("--num-minibatches", type=positive_int,
                        help="default: auto-scaled from 4 for the largest count, the same for all")
    parser.add_argument("--update-epochs", type=positive_int,
                        help="default: auto-scaled from 4 for the largest count, the same for all")
    parser.add_argument("--updates", type=positive_int, default=2,
                        help="updates per timed chunk (default 2; at most 10, the trainer's "
                             "largest chunk: a larger value times chunks of 10)")
    parser.add_argument("--repeats", type=positive_int, default=3,
                        help="timed chunks per count; the median is shown (default 3)")
    parser.add_argument("--use-cache", action="store_true",
                        help="allow the persistent compilation cache (default off: cold compiles)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    args.devices = sorted(set(args.devices))
    explicit = {name: getattr(args, name) for name in ("num_minibatches", "update_epochs")
                if getattr(args, name) is not None}
    explicit.update(network_options(args))
    from hackmatrix.training.config import ConfigError
    try:
        if args.json is not None:
            tool_cli.check_output_file(args.json, "--json")
        configs = _configs(args, explicit)
    except (ConfigError, tool_cli.ToolError) as error:
        parser.error(str(error))

    first = configs[args.devices[0]]
    fixed = {"num_minibatches": first.num_minibatches, "update_epochs": first.update_epochs}
    print(f"scale: training SPS at {args.num_envs} envs x {args.num_steps} steps (batch "
          f"{first.batch_size}, {first.num_minibatches} minibatches x {first.update_epochs} "
          f"epochs) on {', '.join(map(str, args.devices))} device(s), each count in a fresh "
          f"process; ratio: SPS over that of the fewest devices measured; {CPU_NOTE}",
          flush=True)
    report = {"backend": None, "device_kind": None, "num_envs": args.num_envs,
              "num_steps": args.num_steps, "batch_size": first.batch_size, **fixed,
              "updates_per_chunk": first.updates_per_chunk, "repeats": args.repeats,
              "network": first.network_config, "note": CPU_NOTE,
              "ratio_base_devices": None, "results": [], "skipped": []}
    available = None
    for count in args.devices:
        if available is not None and count > available:
            reason = f"{count}, but JAX sees {available} {report['backend']} device(s)"
            report["skipped"].append({"devices": count, "reason": reason})
            print(f"{count:>7}  skipped: {reason}", flush=True)
            continue
        result = run_count({"devices": count, "num_envs": args.num_envs,
                            "num_steps": args.num_steps, "hidden_dim": args.hidden_dim,
                            "num_layers": args.num_layers, "updates": args.updates,
                            "repeats": args.repeats, "explicit": {**explicit, **fixed},
                            "use_cache": args.use_cache})
        if report["backend"] is None:
            report.update(backend=result["backend"], device_kind=result["device_kind"])
            if result["backend"] != "cpu":  # real devices: their count is fixed
                available = result["available"]
            label = f" cpu_compile={result['cpu_compile']}" if result["cpu_compile"] else ""
            print(f"backend={result['backend']}{label} device={result['device_kind']}"
                  + (f" available={available}" if available is not None else ""))
            print(f"{'devices':>7} {'train_sps':>10} {'ratio':>6} {'compile_s':>9} "
                  f"{'first_upd_s':>11}", flush=True)
        if "skipped" in result:
            report["skipped"].append({"devices": count, "reason": result["skipped"]})
            print(f"{count:>7}  skipped: {result['skipped']}", flush=True)
            continue
        if not report["results"]:
            report["ratio_base_devices"] = count
        base = report["results"][0]["sps"] if report["results"] else result["sps"]
        row = {"devices": count, "sps": result["sps"], "ratio": result["sps"] / base,
               "compile_s": result["compile_s"], "first_update_s": result["first_update_s"],
               "sps_all": result["sps_all"]}
        report["results"].append(row)
        print(f"{count:>7} {row['sps']:>10.0f} {row['ratio']:>6.2f} {row['compile_s']:>9.1f} "
              f"{row['first_update_s']:>11.1f}", flush=True)
    if args.json is not None:
        from hackmatrix.training.atomic_files import atomic_write
        text = json.dumps(report, indent=2) + "\n"
        atomic_write(pathlib.Path(args.json), lambda file: file.write(text.encode()))
    return 0
