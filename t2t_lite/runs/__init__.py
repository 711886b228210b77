"""Everything about a run directory (``output_dir``): what it holds and how later commands use it.

* ``config``: ``RunConfig``, the self-describing ``run_config.json`` (problem, model,
  hparams, vocabulary) the trainer writes and every later command reads.
* ``loading``: ``build_model(run_config)``, the one place a run's model is built (the
  trainer under its strategy's scope, and every command that loads a run), resolving and
  restoring checkpoints, with the fall-back past a damaged latest checkpoint; an
  ensemble's members with ``load_trained_runs``.
* ``ensemble_members``: which runs and checkpoints an ensemble is made of (the decoder's
  ``--checkpoint_path=A,B`` and ``--ensemble_dirs``), checked without TensorFlow.
* ``averaging``: ``t2t-lite-avg-checkpoints``' mean of a run's last checkpoints.
* ``export``: the SavedModel that maps raw strings to translations.

Imports: ``runs`` uses the stages below it (``data``, ``models`` through the registry,
``decoding`` for the exported ``Translator``) and never ``training`` or ``commands``.
``training`` imports ``runs.config`` and ``runs.loading`` (the trainer writes the run
directory, builds its model with ``build_model`` and reads checkpoints as the commands
do): it sits above ``runs``. This file imports nothing, so importing one submodule does
not pull in the others (``runs.export`` needs ``decoding``; the trainer does not).
"""
