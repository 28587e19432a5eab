"""hackmatrix.messages: how values, names and exceptions appear in one-line error messages."""

import pytest

from hackmatrix.messages import SHOWN_LENGTH, error_line, name_shown, one_line, shown


@pytest.mark.parametrize("error, expected", [
    (ValueError("bad  value\n  and a second line"), "ValueError: bad value"),
    (RuntimeError("\n\nsummary after blank lines\ndetail"), "RuntimeError: summary after blank lines"),
    (KeyError("key"), "KeyError: 'key'"),
    (OSError(), "OSError"),
    (ValueError("   "), "ValueError"),
])
def test_error_line_is_the_type_and_the_first_line_of_the_message(error, expected):
    assert error_line(error) == expected


def test_shown_is_one_bounded_line_and_never_raises():
    assert shown("a\nb") == "'a\\nb'"
    assert shown([1, 2]) == "[1, 2]"
    long = shown("x" * 1000)
    assert len(long) == SHOWN_LENGTH and long.endswith("...")
    assert shown(10 ** 5000) == "<int too large to show>"
    nested = []
    for _ in range(100_000):
        nested = [nested]
    assert shown(nested) == "<list too large to show>"


@pytest.mark.parametrize("name, expected", [
    ("stage", "stage"), ("", "''"), ("two\nlines", "'two\\nlines'"), (3, "3"),
    ("k" * (SHOWN_LENGTH + 1), repr("k" * (SHOWN_LENGTH + 1))[:SHOWN_LENGTH - 3] + "..."),
])
def test_name_shown_quotes_only_what_would_be_unclear(name, expected):
    assert name_shown(name) == expected


def test_one_line_escapes_control_characters_only():
    assert one_line("runs/ü 中") == "runs/ü 中"
    assert one_line("a\nb\rc\td\x00") == "a\\nb\\rc\\td\\x00"
