"""Parameter counts of a model, and building a model's weights as shapes only.

``build_shapes_only`` builds every weight inside ``keras.StatelessScope(
initialize_variables=False)``, so the variables have shapes but no values: counting the
parameters of the 214M-parameter big model then takes a fraction of a second and no
memory. Such a model can be counted, not run.
"""
from __future__ import annotations

from typing import Dict

import keras

from t2t_lite.hparams_lib import HParams
from t2t_lite.registry import MODELS


def build_shapes_only(hparams: HParams, vocab_size: int, model: str = "transformer"):
    """The registered ``model`` built from ``hparams`` with uninitialised weights."""
    model_class = MODELS.get(model)
    with keras.StatelessScope(initialize_variables=False):
        instance = model_class(hparams, vocab_size)
        instance.build()
    _forget_pending(instance.weights)
    return instance


def _forget_pending(variables) -> None:
    """Drops ``variables`` from Keras's list of variables awaiting initialisation, so
    that no later scope initialises them. (Keras keeps that list in private state.)"""
    from keras.src.backend.common import global_state
    ids = {id(v) for v in variables}
    pending = global_state.get_global_attribute("uninitialized_variables") or []
    global_state.set_global_attribute("uninitialized_variables",
                                      [v for v in pending if id(v) not in ids])


def parameter_counts(model: keras.Model) -> Dict[str, int]:
    """{"embedding", "encoder", "decoder", "total"} parameter counts of a built Transformer.

    "embedding" holds the shared token embedding (counted once however often it is used),
    a separate softmax matrix when untied, and learned positional embeddings.
    """
    counts = {"encoder": model.encoder.count_params(),
              "decoder": model.decoder.count_params(),
              "total": model.count_params()}
    counts["embedding"] = counts["total"] - counts["encoder"] - counts["decoder"]
    return {key: counts[key] for key in ("embedding", "encoder", "decoder", "total")}
