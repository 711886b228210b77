"""Decoding: beam search (the paper's), greedy search, random sampling, scoring given
targets, their shared step interface and decoding plan, and typed decode hyperparameters.

Importing this package, ``config``, ``lines``, ``plan`` or ``step`` does not import
TensorFlow: the searches (``beam_search``, ``greedy_search``, ``sample_search`` with its
``Sampler``, ``length_penalty``, ``tile_beams``) and scoring (``Scorer``, ``score_ids``)
are loaded on first use, so the commands' ``--help`` and the decoder's line handling stay
light.
"""
from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from t2t_lite.decoding.config import DecodeHParams, DecodeHParamsError, parse_decode_hparams
from t2t_lite.decoding.plan import DecodingPlan
from t2t_lite.decoding.step import DecodingModel, DecodingState, StepFn, step_function

_LAZY = {"beam_search": "t2t_lite.decoding.beam_search",
         "length_penalty": "t2t_lite.decoding.search_common",
         "tile_beams": "t2t_lite.decoding.search_common",
         "greedy_search": "t2t_lite.decoding.greedy",
         "sample_search": "t2t_lite.decoding.sampling",
         "Sampler": "t2t_lite.decoding.sampling",
         "Scorer": "t2t_lite.decoding.scoring",
         "score_ids": "t2t_lite.decoding.scoring"}

__all__ = ["DecodeHParams", "DecodeHParamsError", "DecodingModel", "DecodingPlan",
           "DecodingState", "Sampler", "Scorer", "StepFn", "beam_search", "greedy_search",
           "length_penalty", "parse_decode_hparams", "sample_search", "score_ids",
           "step_function", "tile_beams"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(types.ModuleType):
    """Keeps ``t2t_lite.decoding.beam_search`` the function: importing the submodule of
    the same name would otherwise bind the package attribute to the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return  # the module stays in sys.modules; the name resolves to the function
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
