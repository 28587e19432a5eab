"""The command-line shell: what a program does to the process it runs in, and nothing a library
import does. Entry points, starting and ending a CLI, exit codes, signal handling, stdout that
may close, room for JAX's tracing, garbage-collector pauses, JAX's backends and its persistent
compilation cache. Each program opts in at start (`launch.run`)."""
