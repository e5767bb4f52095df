"""Every module in ``src`` stays small enough to read as one concept: at most `MAX_MODULE_LINES` lines."""

from pathlib import Path

import dex_agents

MAX_MODULE_LINES = 450
"""The most lines a module of the package may have (docstrings and blank lines count)."""

PACKAGE = Path(dex_agents.__file__).parent


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_of_the_package_is_over_the_line_limit() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    too_long = {str(path.relative_to(PACKAGE)): _lines(path) for path in modules if _lines(path) > MAX_MODULE_LINES}

    assert len(modules) > 100, f"found only {len(modules)} modules under {PACKAGE}"
    assert too_long == {}, f"split these by concept (at most {MAX_MODULE_LINES} lines each): {too_long}"
