"""Every ``tf.function`` of the package, its scripts and its tests is traced without
AutoGraph.

The package writes its graph control flow itself (``tf.while_loop``, ``tf.cond``), so
AutoGraph has nothing to convert, and converting costs start-up time: it re-reads and
rewrites the source of every package function a trace calls. Without it a Python ``if`` on
a tensor fails at trace time instead of turning into a ``tf.cond``, and tracing these
functions does not re-read their source files. The tests trace the package's functions as
the package does: a test's own ``tf.function`` around a search with AutoGraph on would
convert the package's code, which no user's run does, and spend seconds on it."""
import ast
from pathlib import Path

import t2t_lite

PACKAGE = Path(t2t_lite.__file__).parent
SCRIPTS = PACKAGE.parent / "scripts"
TESTS = Path(__file__).resolve().parent


def tf_function_calls(path: Path):
    """(line, {keyword: value node}) of every ``tf.function(...)`` call or decorator in
    ``path`` (a bare ``@tf.function`` has no keywords)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "function" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "tf"):
            yield node.lineno, {keyword.arg: keyword.value for keyword in node.keywords}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                if (isinstance(decorator, ast.Attribute) and decorator.attr == "function"
                        and isinstance(decorator.value, ast.Name) and decorator.value.id == "tf"):
                    yield decorator.lineno, {}   # a bare @tf.function


def test_every_tf_function_turns_autograph_off():
    paths = sorted(PACKAGE.rglob("*.py")) + sorted(SCRIPTS.glob("*.py"))
    calls = [(path, line, keywords) for path in paths
             for line, keywords in tf_function_calls(path)]
    assert len(calls) >= 15          # the scan finds the package's functions
    test_calls = [(path, line, keywords) for path in sorted(TESTS.glob("*.py"))
                  for line, keywords in tf_function_calls(path)]
    assert len(test_calls) >= 15     # and the tests' own
    calls += test_calls
    with_autograph = [f"{path.relative_to(PACKAGE.parent)}:{line}"
                      for path, line, keywords in calls
                      if not (isinstance(keywords.get("autograph"), ast.Constant)
                              and keywords["autograph"].value is False)]
    assert with_autograph == [], "pass autograph=False to tf.function at these lines"
