"""Stages import only the stages below them (data, layers, models, decoding, runs,
training, commands): ``runs`` never imports ``training`` or ``commands`` (which import it),
and its ``__init__`` imports nothing, so that the trainer importing ``runs.config`` does
not pull in ``runs.export``; ``decoding`` never imports ``training``, ``runs`` or
``commands`` (the trainer's evaluation and the exporter use it)."""
import ast
from pathlib import Path

import t2t_lite.runs

RUNS = Path(t2t_lite.runs.__file__).parent
PACKAGE = RUNS.parent


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


def upward_imports(stage: str, above: tuple) -> set:
    """``"module: imported name"`` for every import in ``t2t_lite/<stage>/`` of a stage in
    ``above``."""
    modules = sorted((PACKAGE / stage).glob("*.py"))
    assert modules, stage
    prefixes = tuple(f"t2t_lite.{name}" for name in above)
    return {f"{path.name}: {name}" for path in modules for name in imported_modules(path)
            if name.startswith(prefixes)}


def test_runs_never_imports_training_or_commands():
    assert {path.name for path in RUNS.glob("*.py")} >= {"__init__.py", "config.py",
                                                        "loading.py", "averaging.py",
                                                        "export.py"}
    assert upward_imports("runs", ("training", "commands")) == set()


def test_decoding_never_imports_training_runs_or_commands():
    assert upward_imports("decoding", ("training", "runs", "commands")) == set()


def test_runs_init_imports_nothing():
    assert imported_modules(RUNS / "__init__.py") == set()
