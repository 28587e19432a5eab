"""The tool programs' `main(argv) -> exit code` functions, one module per program (the trainer's
is `hackmatrix.training.cli`); `hackmatrix.shell.entry_points` starts them as command-line programs."""
