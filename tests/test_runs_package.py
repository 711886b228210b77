"""``t2t_lite.runs`` imports only the stages below it: never ``training`` or ``commands``
(which import it), and its ``__init__`` imports nothing, so that the trainer importing
``runs.config`` does not pull in ``runs.export`` and ``decoding``."""
import ast
from pathlib import Path

import t2t_lite.runs

RUNS = Path(t2t_lite.runs.__file__).parent


def imported_modules(path: Path) -> set:
    """Every module ``path`` imports, at the top or inside functions (absolute names)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import of {node.module}"
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_runs_never_imports_training_or_commands():
    modules = sorted(RUNS.glob("*.py"))
    assert {path.name for path in modules} >= {"__init__.py", "config.py", "loading.py",
                                               "averaging.py", "export.py"}
    upward = {f"{path.name}: {name}" for path in modules for name in imported_modules(path)
              if name.startswith(("t2t_lite.training", "t2t_lite.commands"))}
    assert not upward


def test_runs_init_imports_nothing():
    assert imported_modules(RUNS / "__init__.py") == set()
