"""The exit codes every command-line program of the project shares (README, "Exit codes")."""

EXIT_OK = 0
EXIT_FAILURE = 2  # any other failure, said in one line
EXIT_BAD_ARGUMENTS = 3  # bad flags or values, an unwritable output, a malformed scenario file
EXIT_BAD_CHECKPOINT = 6  # a missing, corrupt or incompatible checkpoint or run directory
EXIT_INTERRUPTED = 7  # SIGINT or SIGTERM (the trainer saves a checkpoint first)
