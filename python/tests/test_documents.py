"""The documents written for users: README.md and specs/*.md.

Every file they point to is in the repository (a clone has nothing beside it), the README gives
the exact test command that CI runs, and they describe the product, not the history of its
development (no issue numbers, no work sessions)."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "specs").glob("*.md"))]

# [text](target) links, and `path` spans that name a document or a repository folder.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`([^`\s]+)`")
_PATH_LIKE = re.compile(r"^(\.\./|python/|specs/|\.ci/)[\w./-]*$|^[\w./-]+\.md$")
_ISSUE_REFERENCE = re.compile(r"\bissues?\s*#?\s*\d+|#\d{2,}", re.IGNORECASE)
_SESSION = re.compile(r"\bsessions?\b", re.IGNORECASE)


def _document_ids():
    return [str(path.relative_to(REPO)) for path in DOCUMENTS]


def _references(text: str) -> list[str]:
    """The relative targets of a document's links and path-like code spans, anchors removed."""
    targets = [match.group(1) for match in _LINK.finditer(text)]
    targets += [span for span in _CODE_SPAN.findall(text) if _PATH_LIKE.match(span)]
    relative = []
    for target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same document
        relative.append(target.split("#", 1)[0])
    return relative


def _resolves_inside_repository(document: Path, target: str) -> bool:
    """A target names an existing file or folder of the repository, read relative to the document
    (as a Markdown renderer does) or to the repository root (as the documents write paths)."""
    for base in (document.parent, REPO):
        candidate = (base / target).resolve()
        if candidate.exists() and (candidate == REPO or REPO in candidate.parents):
            return True
    return False


@pytest.mark.parametrize("document", DOCUMENTS, ids=_document_ids())
def test_every_relative_link_points_to_a_file_in_the_repository(document):
    references = _references(document.read_text(encoding="utf-8"))
    missing = sorted({target for target in references
                      if not _resolves_inside_repository(document, target)})
    assert not missing, f"{document.name} points to files outside the repository: {missing}"


def test_the_readme_gives_the_test_command_that_ci_runs():
    ci_lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line.strip() for line in ci_lines
                if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))]
    assert any("pytest" in command for command in commands), commands
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for command in commands:
        assert command in readme, f"README.md lacks .ci/run's command: {command}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=_document_ids())
def test_documents_describe_the_product_not_its_history(document):
    text = document.read_text(encoding="utf-8")
    assert not _ISSUE_REFERENCE.findall(text), "issue-number references"
    sessions = [line for line in text.splitlines() if _SESSION.search(line)]
    assert not sessions, f"'session' in {document.name}: {sessions[:3]}"
