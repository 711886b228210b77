"""t2t-lite: the Transformer of "Attention Is All You Need" in TensorFlow 2 + Keras 3.

The registered problems and hparam sets live in the repository's top-level folders
``problems/`` and ``hparams/``; setup.py installs them as ``t2t_lite.problems`` and
``t2t_lite.hparams`` (no generic top-level name in site-packages). Run from a plain
checkout (the repository root on ``sys.path``, nothing installed), ``_CheckoutFolders``
maps the same two names onto those folders, so ``import t2t_lite.problems`` works there
too. An installed or editable package is found first and the mapping is then unused.
"""
import importlib.abc
import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"

# Package name -> the repository folder that holds it (also setup.py's package_dir).
CHECKOUT_FOLDERS = {"t2t_lite.problems": "problems", "t2t_lite.hparams": "hparams"}


class _CheckoutFolders(importlib.abc.MetaPathFinder):
    """Finds ``t2t_lite.problems``/``t2t_lite.hparams`` in the checkout beside this
    package; their modules are then found through the package's ``__path__``."""

    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        folder = CHECKOUT_FOLDERS.get(fullname)
        if folder is None:
            return None
        init = self.root / folder / "__init__.py"
        if not init.is_file():
            return None
        return importlib.util.spec_from_file_location(
            fullname, init, submodule_search_locations=[str(init.parent)])


_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "setup.py").is_file() and not any(isinstance(finder, _CheckoutFolders)
                                              for finder in sys.meta_path):
    sys.meta_path.append(_CheckoutFolders(_ROOT))  # after every installed package's finder
