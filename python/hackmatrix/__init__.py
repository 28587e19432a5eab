"""HackMatrix RL: the game in pure JAX, PPO training, and tools to watch agents."""

from hackmatrix import xla_options

# Before JAX starts its backends, which read XLA_FLAGS once: see xla_options.
xla_options.configure_cpu_compiler()
