"""HackMatrix RL: the game in pure JAX, PPO training, and tools to watch agents."""
