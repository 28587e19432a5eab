"""Static facts of HackMatrix (rules §1, §3, §7.1, §9.1, §14, §15).

Everything here is a Python or NumPy constant, never traced. Static capacities live here too:
they fix array shapes, so changing one recompiles everything.
"""

import numpy as np

BOARD_SIZE = 6
NUM_CELLS = BOARD_SIZE * BOARD_SIZE

# Directions in the rules' fixed order (§1): up, down, left, right. Row 0 is the bottom row.
DIRECTION_DELTAS = np.array([[1, 0], [-1, 0], [0, -1], [0, 1]], dtype=np.int32)
CORNERS = np.array([[0, 0], [0, 5], [5, 0], [5, 5]], dtype=np.int32)

# Actions (§3).
NUM_ACTIONS = 28
NUM_DIRECTIONS = 4
ACTION_SIPHON = 4
FIRST_PROGRAM_ACTION = 5
NUM_PROGRAMS = 23

PROGRAM_NAMES = (
    "PUSH", "PULL", "CRASH", "WARP", "POLY", "WAIT", "DEBUG", "ROW", "COL", "UNDO", "STEP",
    "SIPH+", "EXCH", "SHOW", "RESET", "CALM", "D_BOM", "DELAY", "ANTI-V", "SCORE", "REDUC",
    "ATK+", "HACK",
)
ACTION_NAMES = ("up", "down", "left", "right", "siphon") + PROGRAM_NAMES

# Program index k (0..22) == action 5 + k.
(PUSH, PULL, CRASH, WARP, POLY, WAIT, DEBUG, ROW, COL, UNDO, STEP, SIPH_PLUS, EXCH, SHOW, RESET,
 CALM, D_BOM, DELAY, ANTI_V, SCORE, REDUC, ATK_PLUS, HACK) = range(NUM_PROGRAMS)
ACTION_WAIT = FIRST_PROGRAM_ACTION + WAIT

# §7.1 costs and block spawn costs, indexed by program index.
PROGRAM_CREDIT_COST = np.array(
    [0, 0, 3, 2, 1, 0, 3, 3, 3, 1, 0, 5, 4, 2, 0, 2, 3, 1, 3, 0, 2, 4, 2], dtype=np.int32)
PROGRAM_ENERGY_COST = np.array(
    [2, 2, 2, 2, 1, 1, 0, 1, 1, 0, 3, 0, 0, 0, 4, 4, 0, 2, 0, 5, 1, 4, 2], dtype=np.int32)
PROGRAM_SPAWN_COST = np.array(
    [4, 4, 6, 5, 3, 1, 4, 2, 2, 3, 4, 7, 3, 2, 2, 6, 4, 4, 4, 5, 3, 8, 4], dtype=np.int32)

# Enemy types (§9.1).
VIRUS, DAEMON, GLITCH, CRYPTOG = range(4)
NUM_ENEMY_TYPES = 4
ENEMY_TYPE_NAMES = ("virus", "daemon", "glitch", "cryptog")
ENEMY_MAX_HP = np.array([2, 3, 2, 2], dtype=np.int32)
ENEMY_SPEED = np.array([2, 1, 1, 1], dtype=np.int32)

# Cell content (§2.2). A cell holds exactly one of these; the three block kinds are contents.
EMPTY, DATA_BLOCK, PROGRAM_BLOCK, QUESTION_BLOCK, DATA_SIPHON, EXIT = range(6)


def is_block(content):
    """Cells holding a data, program or question block (§2.3), for NumPy or JAX arrays."""
    return (content >= DATA_BLOCK) & (content <= QUESTION_BLOCK)

NO_PROGRAM = -1

# Static capacities. Spawns only go to free cells, so 36 slots per list never drop one in
# practice (§2.7). The UNDO history is a ring buffer: the oldest snapshot drops when full.
MAX_ENEMIES = 36
MAX_TRANSMISSIONS = 36
HISTORY_CAPACITY = 32
MAX_STAGE = 8

# Rewards (§14).
STAGE_REWARD_TABLE = np.array([1, 2, 4, 8, 16, 32, 64, 100], dtype=np.float32)
STEP_PENALTY = -0.01
REWARD_COMPONENTS = (
    "step_penalty", "stage", "score", "kills", "dataSiphon", "distance", "victory", "death",
    "resourceGain", "resourceHolding", "damagePenalty", "hpRecovery", "siphonQuality",
    "programWaste", "siphonDeathPenalty",
)
NUM_REWARD_COMPONENTS = len(REWARD_COMPONENTS)

# Observation (§15).
PLAYER_FEATURES = 10
GRID_CHANNELS = 42
