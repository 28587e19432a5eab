#!/usr/bin/env bash
# The accelerator check: the figures to take on a GPU or TPU host, and a checkpoint carried from
# CPU to the accelerator and back, in one run that a deadline holds under 8 minutes
# (specs/performance.md, "On GPU and TPU").
#
#   python/scripts/accelerator_check.sh [--quick] [--budget SECONDS]
#
# Steps, each printing its command first and logging to $OUT/<step>.log:
#   info        nvidia-smi (when present), JAX's version, backend and devices
#   resume      a tiny run trained with JAX_PLATFORMS=cpu, resumed on the default backend (the
#               accelerator), then resumed on CPU again; each leg must exit 0 and save the
#               checkpoint of its last update
#   env         benchmark.py env at 2048, 8192 and 32768 envs (steps/s, compile times)
#   train       benchmark.py train at 2048, 8192 and 32768 envs, float32 (SPS, compile times)
#   train_bf16  benchmark.py train at 8192 envs with --dtype bfloat16
#   scale       benchmark.py scale: 1 device against all of them (skipped on one real device)
# $OUT/summary.txt gathers every step's command, status, time and output; $OUT/scale.json is
# scale's report. OUT defaults to ./accelerator_check_out. Every step runs under a deadline
# (--budget, 470 s by default): a step still running at its limit is interrupted (SIGINT: the
# benchmarks keep the lines they printed) and reported as timed out; a step with no time left
# is skipped. --quick shrinks every size so that the whole check runs on a CPU-only machine in a
# few minutes (budget 1500 s); its figures mean nothing.
#
# Exit codes: 0 every step passed, 2 a step failed, timed out or was skipped, 3 bad arguments.

set -euo pipefail

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }

QUICK=0
BUDGET=
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --budget)
            if [[ $# -lt 2 || ! "$2" =~ ^[1-9][0-9]*$ ]]; then
                echo "accelerator_check.sh: error: --budget takes a positive number of seconds" >&2
                exit 3
            fi
            BUDGET=$2
            shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "accelerator_check.sh: error: unknown argument: $1 (see --help)" >&2; exit 3 ;;
    esac
    shift
done
if [[ -z "$BUDGET" ]]; then
    BUDGET=$(( QUICK ? 1500 : 470 ))
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-./accelerator_check_out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PYTHON=${PYTHON:-python3}
BENCH=("$PYTHON" "$ROOT/python/scripts/benchmark.py")
TRAIN=("$PYTHON" "$ROOT/python/scripts/train_purejaxrl.py")
# The package from this checkout, installed or not; the trainer's compiles cached in a folder of
# this check's own (the benchmarks compile cold); no wandb.
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
WORK=$(mktemp -d "${TMPDIR:-/tmp}/accelerator_check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export JAX_COMPILATION_CACHE_DIR="$WORK/jax_cache"

START=$(date +%s)
DEADLINE=$(( START + BUDGET ))
SUMMARY="$OUT/summary.txt"
FAILED=0
STATUS_LINES=()

say() { echo "$*" | tee -a "$SUMMARY"; }

# run_logged LOG CAP COMMAND...: runs COMMAND, its output shown and appended to LOG, under
# `timeout` with the smaller of CAP and the time left; sets RC (124: timed out) and SECONDS_USED.
run_logged() {
    local log=$1 cap=$2
    shift 2
    local left=$(( DEADLINE - $(date +%s) ))
    local limit=$(( cap < left ? cap : left ))
    echo "+ $*" | tee -a "$log"
    local began
    began=$(date +%s)
    set +e
    timeout --signal=INT --kill-after=20 "$limit" "$@" 2>&1 | tee -a "$log"
    RC=${PIPESTATUS[0]}
    set -e
    SECONDS_USED=$(( $(date +%s) - began ))
    echo "[exit $RC after ${SECONDS_USED}s]" | tee -a "$log"
}

# record NAME STATUS DETAIL: one line of the summary's table; any status but ok fails the check.
record() {
    STATUS_LINES+=("$(printf '%-13s %-10s %s' "$1" "$2" "$3")")
    [[ "$2" == ok ]] || FAILED=1
}

status_of() {  # status_of RC
    case "$1" in
        0) echo ok ;;
        124|137) echo "timed-out" ;;
        *) echo failed ;;
    esac
}

# step NAME CAP COMMAND...: one benchmark step, logged to $OUT/NAME.log, its output in the summary.
step() {
    local name=$1 cap=$2
    shift 2
    local log="$OUT/$name.log"
    : > "$log"
    echo
    echo "=== $name"
    if (( DEADLINE - $(date +%s) < 30 )); then
        echo "no time left: skipped" | tee -a "$log"
        record "$name" skipped "no time left within --budget $BUDGET: $*"
        { echo; echo "=== $name: skipped (no time left)"; echo "\$ $*"; } >> "$SUMMARY"
        return 0
    fi
    run_logged "$log" "$cap" "$@"
    local status
    status=$(status_of "$RC")
    record "$name" "$status" "exit $RC, ${SECONDS_USED}s"
    {
        echo
        echo "=== $name: $status (exit $RC, ${SECONDS_USED}s)"
        echo "\$ $*"
        # The command's output without XLA's and absl's log lines (W0101 12:00:00 ...).
        grep -v -E '^[+]|^\[exit |^[WIEF][0-9]{4} ' "$log" | tail -n 60
    } >> "$SUMMARY"
}

if (( QUICK )); then
    SIZES=(8 16)
    ONE_SIZE=8
    SHAPE=(--num-steps 8 --hidden-dim 16 --num-layers 1)
    ENV_ARGS=(--num-envs "${SIZES[@]}" --repeats 2 --scan-steps 16)
    TIMED=(--updates 1 --repeats 1)
else
    SIZES=(2048 8192 32768)
    ONE_SIZE=8192
    SHAPE=()
    ENV_ARGS=(--num-envs "${SIZES[@]}" --repeats 3)
    TIMED=(--updates 1 --repeats 3)
fi

: > "$SUMMARY"
say "accelerator check$( (( QUICK )) && echo ' (--quick: tiny sizes, the figures mean nothing)'), budget ${BUDGET}s"
say "started $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
say "commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"

# --- info: the card, JAX's backend and devices.
INFO_LOG="$OUT/info.log"
: > "$INFO_LOG"
echo "=== info"
if command -v nvidia-smi > /dev/null; then
    run_logged "$INFO_LOG" 30 nvidia-smi
    run_logged "$INFO_LOG" 30 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
fi
run_logged "$INFO_LOG" 60 "$PYTHON" -c 'import jax
print("jax", jax.__version__)
print("backend", jax.default_backend())
print("device_count", jax.local_device_count())
print("device_kind", jax.local_devices()[0].device_kind)
print("devices", jax.devices())'
INFO_RC=$RC
BACKEND=$(sed -n 's/^backend //p' "$INFO_LOG" | tail -n 1)
DEVICES=$(sed -n 's/^device_count //p' "$INFO_LOG" | tail -n 1)
KIND=$(sed -n 's/^device_kind //p' "$INFO_LOG" | tail -n 1)
if [[ "$INFO_RC" != 0 || -z "$BACKEND" || -z "$DEVICES" ]]; then
    record info failed "JAX did not start (exit $INFO_RC): see $INFO_LOG"
    say "JAX did not start: see $INFO_LOG"
    printf '%s\n' "${STATUS_LINES[@]}" | tee -a "$SUMMARY"
    exit 2
fi
record info ok "backend $BACKEND, $DEVICES device(s): $KIND"
{
    echo
    echo "=== info"
    grep -E -v '^[+]|^\[exit ' "$INFO_LOG" | grep -E '^(jax|backend|device_count|device_kind|devices) |, [0-9]+ MiB, ' || true
} >> "$SUMMARY"
if [[ "$BACKEND" == cpu ]]; then
    say "note: the default backend is cpu: the resume check only crosses processes, and scale's devices are simulated"
fi

# --- resume: CPU -> default backend -> CPU, one run directory.
RESUME_LOG="$OUT/resume.log"
: > "$RESUME_LOG"
CHECKPOINTS="$WORK/checkpoints"
# 64 steps per update: 2 updates per leg.
TINY=(--run-name carried --checkpoint-dir "$CHECKPOINTS" --no-wandb --num-envs 8 --num-steps 8
      --hidden-dim 16 --num-layers 1 --verbose)
resume_leg() {  # resume_leg NAME PLATFORMS UPDATES ARGS...: a leg that must end at UPDATES
    local name=$1 platforms=$2 updates=$3
    shift 3
    echo
    echo "=== resume: $name"
    echo "--- $name" >> "$RESUME_LOG"
    if (( DEADLINE - $(date +%s) < 30 )); then
        record "$name" skipped "no time left within --budget $BUDGET"
        return 1
    fi
    local command=("${TRAIN[@]}" "${TINY[@]}" --total-timesteps $(( 64 * updates )) "$@")
    local first_line=$(( $(wc -l < "$RESUME_LOG") + 1 ))  # this leg's output starts here
    if [[ -n "$platforms" ]]; then
        run_logged "$RESUME_LOG" 150 env JAX_PLATFORMS="$platforms" "${command[@]}"
    else  # the default backend, as the other steps run
        run_logged "$RESUME_LOG" 150 "${command[@]}"
    fi
    local status leg_log="$WORK/$name.log"
    tail -n "+$first_line" "$RESUME_LOG" > "$leg_log"
    status=$(status_of "$RC")
    local detail="exit $RC, ${SECONDS_USED}s"
    # The leg ran on the platform asked for, and saved the checkpoint of its last update.
    local device=${platforms:-$BACKEND}
    if [[ "$status" == ok ]] && ! grep -q "^\[config\] run=carried device=$device " "$leg_log"; then
        status=failed
        detail="$detail; no '[config] run=carried device=$device' line"
    fi
    if [[ "$status" == ok && ! -f "$CHECKPOINTS/carried/checkpoint_$updates.pkl" ]]; then
        status=failed
        detail="$detail; no checkpoint_$updates.pkl"
    fi
    record "$name" "$status" "$detail"
    {
        echo
        echo "=== $name: $status ($detail)"
        echo "\$ ${platforms:+JAX_PLATFORMS=$platforms }${command[*]}"
        grep -E '^\[(config\] run=|resume\]|checkpoint\]|done\])|error' "$leg_log" || true
    } >> "$SUMMARY"
    [[ "$status" == ok ]]
}
if ! resume_leg resume_cpu cpu 2; then
    record resume_accel skipped "the CPU run before it did not pass"
    record resume_back skipped "the CPU run before it did not pass"
elif ! resume_leg resume_accel "" 4 --resume; then
    record resume_back skipped "the resume on $BACKEND before it did not pass"
else
    resume_leg resume_back cpu 6 --resume || true
fi

# --- the figures.
step env 150 "${BENCH[@]}" env "${ENV_ARGS[@]}"
step train 210 "${BENCH[@]}" train --num-envs "${SIZES[@]}" "${SHAPE[@]}" "${TIMED[@]}" \
    --skip-network-only
step train_bf16 100 "${BENCH[@]}" train --num-envs "$ONE_SIZE" "${SHAPE[@]}" "${TIMED[@]}" \
    --skip-network-only --dtype bfloat16
if [[ "$BACKEND" == cpu ]]; then
    SCALE_DEVICES=1,2  # simulated
elif (( DEVICES > 1 )); then
    SCALE_DEVICES=1,$DEVICES
else
    SCALE_DEVICES=
fi
if [[ -n "$SCALE_DEVICES" ]]; then
    SCALE_COUNT=${SCALE_DEVICES#1,}
    step scale 150 "${BENCH[@]}" scale --devices "$SCALE_DEVICES" \
        --num-envs $(( ONE_SIZE / 4 * SCALE_COUNT )) "${SHAPE[@]}" "${TIMED[@]}" \
        --json "$OUT/scale.json"
else
    record scale ok "one $BACKEND device: 1 device against all is train's figure"
    { echo; echo "=== scale: not run (one $BACKEND device: 1 device against all is train's figure)"; } >> "$SUMMARY"
fi

# --- the summary.
ELAPSED=$(( $(date +%s) - START ))
{
    echo
    echo "=== summary: ${ELAPSED}s of a ${BUDGET}s budget; card: ${KIND} (backend $BACKEND, $DEVICES device(s))"
    printf '%s\n' "${STATUS_LINES[@]}"
} | tee -a "$SUMMARY"
echo "logs and summary in $OUT"
if (( FAILED )); then
    exit 2
fi
