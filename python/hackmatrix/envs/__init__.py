"""The environments the trainer and the tools run on, behind one contract (`contract.py`):
HackMatrix (`hackmatrix_env.py`) and any discrete-action gymnax environment
(`gymnax_env.py`). `registry.make_env(env_id)` builds one by its `--env` id."""
