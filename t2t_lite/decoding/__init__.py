"""Decoding: beam search (the paper's), greedy search, and typed decode hyperparameters."""
from t2t_lite.decoding.beam_search import beam_search, length_penalty, tile_beams
from t2t_lite.decoding.config import DecodeHParams, DecodeHParamsError, parse
from t2t_lite.decoding.greedy import greedy_search

__all__ = ["DecodeHParams", "DecodeHParamsError", "beam_search", "greedy_search",
           "length_penalty", "parse", "tile_beams"]
