"""How a bad value, a name or an exception appears in a one-line error message."""

SHOWN_LENGTH = 60


def shown(value) -> str:
    """`repr(value)` on one line of at most ~60 characters, and never an error itself: Python
    refuses to print an integer of over 4300 digits, deep nesting overflows `repr`, and an
    array's repr spans lines."""
    try:
        text = " ".join(repr(value).split())
    except (ValueError, RecursionError):
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= SHOWN_LENGTH else f"{text[:SHOWN_LENGTH - 3]}..."


def name_shown(name) -> str:
    """A key or field name in a message: as it is when it is short printable text, else
    `shown` (quoted, so a line break or an empty name is visible)."""
    if isinstance(name, str) and name.isprintable() and 0 < len(name) <= SHOWN_LENGTH:
        return name
    return shown(name)


def error_line(error: BaseException) -> str:
    """`error` as "Type: the first line of its message", whitespace collapsed, or the type's
    name alone when the message is empty. The first line is the summary: a compiler's or a
    library's message may run on for pages."""
    lines = str(error).strip().splitlines()
    summary = " ".join(lines[0].split()) if lines else ""
    return f"{type(error).__name__}: {summary}" if summary else type(error).__name__


def one_line(text: str) -> str:
    """`text` with its line breaks and other control characters escaped (a user's path or
    name may hold them), so that an error message stays one line."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
