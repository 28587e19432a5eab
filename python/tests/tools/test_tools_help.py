"""What the programs' --help says: the exit codes that apply to each, and pointers into the
project's own specs."""

import pathlib
import re

import pytest

from conftest import load_script

GAME_RULES = pathlib.Path(__file__).resolve().parents[3] / "specs" / "game-rules.md"

# The codes each program's --help lists, and whether it reads a scenario file.
EXIT_CODES = {
    "watch_jax_agent.py": ([0, 2, 3, 6, 7], True),
    "play.py": ([0, 2, 3, 6, 7], True),
    "evaluate.py": ([0, 2, 3, 6, 7], False),
    "plot_metrics.py": ([0, 2, 3, 6, 7], False),
    "benchmark.py": ([0, 2, 3, 7], False),
}


def help_text(script: str, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        load_script(script)(["--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("script", EXIT_CODES)
def test_help_lists_only_the_exit_codes_that_apply(script, capsys):
    codes, reads_scenarios = EXIT_CODES[script]
    _, block = help_text(script, capsys).split("\nexit codes:\n")
    assert [int(line.split()[0]) for line in block.splitlines()] == codes
    assert ("scenario" in block) == reads_scenarios


def test_play_help_points_at_sections_of_the_projects_game_rules(capsys):
    text = " ".join(help_text("play.py", capsys).split())
    sections = dict(re.findall(r"^## (\d+)\. (.+)$", GAME_RULES.read_text(), re.MULTILINE))
    cited = re.findall(r"specs/game-rules\.md §(\d+)", text)
    # The scenario format (save, --scenario) and why an invalid action is refused.
    assert [sections.get(number) for number in cited] == [
        "Scenario API (Appendix A)", "Actions", "Scenario API (Appendix A)"]
    assert "rules Appendix" not in text and "rules §" not in text
