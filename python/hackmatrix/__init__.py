"""HackMatrix RL: the game in pure JAX, PPO training, and tools to watch agents.

Importing any module of the package changes nothing in the process (environment variables,
signal handlers, the garbage collector, stdout); the command-line programs opt in at their
start to what they need (`hackmatrix/shell/launch.py`).
"""
