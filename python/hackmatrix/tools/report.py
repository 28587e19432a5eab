"""Plain-text formatting shared by the viewer and the evaluation CLI."""

from __future__ import annotations

from hackmatrix.game import constants as C


# Why no action is valid (a scenario can wall the player in; a real game never does).
NO_VALID_ACTION_REASON = "no direction is open, there is no data siphon and no program can run"


def action_name(action: int) -> str:
    return C.ACTION_NAMES[action] if 0 <= action < C.NUM_ACTIONS else f"action {action}"


def top_actions_line(top: list[tuple[int, float]], value: float) -> str:
    """`value +1.23 | up 62.0%  WAIT 20.1%  ...` (probabilities of the masked distribution)."""
    shown = "  ".join(f"{action_name(a)} {100 * p:.1f}%" for a, p in top)
    return f"value {value:+.3f} | {shown}"


def reward_line(reward: float, components: dict[str, float]) -> str:
    """`reward +0.040 (step_penalty -0.010, distance +0.050)`: only non-zero components, in the
    rules' order (§14.1), whatever the dict's (JAX returns a pytree's dict keys sorted)."""
    nonzero = [f"{name} {components[name]:+.3f}" for name in C.REWARD_COMPONENTS
               if components.get(name, 0.0) != 0.0]
    return f"reward {reward:+.3f}" + (f" ({', '.join(nonzero)})" if nonzero else "")


def programs_used_text(programs_used: dict[str, int]) -> str:
    if not programs_used:
        return "none"
    ranked = sorted(programs_used.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} x{count}" for name, count in ranked)


def evaluation_table(summaries: dict[str, dict]) -> str:
    """One row per policy, then its action mix and program use."""
    name_width = max([len("policy")] + [len(name) for name in summaries])
    header = (f"{'policy':<{name_width}}  {'return (mean +- std)':>22}  {'stage':>5}  {'max':>3}  "
              f"{'win':>6}  {'score':>7}  {'length':>7}")
    lines = [header, "-" * len(header)]
    for name, s in summaries.items():
        lines.append(
            f"{name:<{name_width}}  {s['mean_return']:>10.3f} +- {s['std_return']:<8.3f}  "
            f"{s['mean_stage']:>5.2f}  {s['max_stage']:>3d}  {100 * s['win_rate']:>5.1f}%  "
            f"{s['mean_score']:>7.2f}  {s['mean_length']:>7.1f}")
    lines.append("")
    for name, s in summaries.items():
        fractions = s["action_fractions"]
        lines.append(
            f"{name}: moves {100 * fractions['move']:.1f}%, siphon {100 * fractions['siphon']:.1f}%, "
            f"programs {100 * fractions['program']:.1f}%; died {100 * s['death_rate']:.1f}%, "
            f"cut off {100 * s['truncated_rate']:.1f}%; programs used: "
            f"{programs_used_text(s['programs_used'])}")
    return "\n".join(lines)
