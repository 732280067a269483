"""Every file and section the code and the docs cite exists.

Docstrings, comments and docs point readers at files (``services/notify.py``,
``docs/operations.md``) and at sections (``docs/auth.md, "Tokens, revocation and expiry"``).
A rename that leaves such a pointer behind sends the next reader nowhere; this finds them.
"""

from __future__ import annotations

import re
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
DJANGO_ADMIN = Path(django.__file__).parent / "contrib" / "admin"

# Where a cited path may live: from the root, inside the app, or where templates and static
# files are looked up (ours, then Django admin's own).
BASES = (
    ROOT,
    ROOT / "mcp_app",
    ROOT / "templates",
    ROOT / "static",
    DJANGO_ADMIN / "templates",
    DJANGO_ADMIN / "static",
)
FIRST_PARTS = (
    "mcp_app|mcpsite|docs|tests|bench|scripts|templates|static|services|protocol|transport|"
    "executors|auth|admin|api|audit|models|ops|bridge|conformance"
)
PATH = re.compile(
    rf"(?<![\w/.-])((?:{FIRST_PARTS})/[\w./-]*\w\.(?:py|md|html|css|json|js|ya?ml|toml))\b"
)
SECTION = re.compile(r'(docs/[\w-]+\.md|README\.md),?\s+"([^"]+)"')


def citing_files() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "dev.py", *ROOT.glob("docs/*.md")]
    for folder in ("mcp_app", "mcpsite", "bench", "scripts", "tests"):
        found += (p for p in (ROOT / folder).rglob("*.py") if "migrations" not in p.parts)
    return found


def section_names(doc: Path) -> list[str]:
    """A document's headings and its bold run-in headings (``**Errors** share ...``)."""
    names = []
    for line in doc.read_text().splitlines():
        if line.startswith("#"):
            names.append(line.lstrip("#").strip())
        elif line.startswith("**"):
            names.append(line[2:].split("**", 1)[0].rstrip("."))
    return names


def test_every_cited_file_exists() -> None:
    missing = [
        f"{path.relative_to(ROOT)} cites {cited}"
        for path in citing_files()
        for cited in PATH.findall(path.read_text())
        if not any((base / cited).exists() for base in BASES)
    ]
    assert missing == []


def test_every_cited_section_exists() -> None:
    missing = []
    for path in citing_files():
        for doc, quoted in SECTION.findall(path.read_text()):
            # A citation wrapped over lines in a comment carries its "#" along.
            section = " ".join(word for word in quoted.split() if word != "#")
            names = section_names(ROOT / doc) if (ROOT / doc).exists() else []
            if not any(name.startswith(section) for name in names):
                missing.append(f'{path.relative_to(ROOT)} cites {doc}, "{section}"')
    assert missing == []
