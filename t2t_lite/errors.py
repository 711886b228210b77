"""The one exception type that marks an error as the user's to fix.

``UserError`` reports a problem with something the user of the commands gave or owns: a
flag or hparams value, a data file or corpus directory, a vocabulary, a checkpoint, a run
directory, a references file, ``TF_CONFIG``. The commands print it as one
``error: ...`` line and exit with status 2 (``t2t_lite.commands.common``); any other
exception is a bug and keeps its traceback. It subclasses ``ValueError`` so that callers
catching ``ValueError`` keep working.
"""
from __future__ import annotations


class UserError(ValueError):
    """An error the user fixes (a flag, a file, a run directory); commands print it as one
    line."""
