"""The Transformer (Vaswani et al., 2017) as a Keras 3 model, in tensor2tensor's style.

Conventions: pad id 0, EOS id 1 (``PAD_ID``, ``EOS_ID`` of ``t2t_lite.data.vocab``, the
vocabulary contract). ``inputs`` [b, s] int32 0-padded, ending with EOS; ``targets``
[b, t] int32 0-padded, ending with EOS. The decoder input is the targets
shifted right by one with 0 as the start symbol; the padding id (and so the start
symbol) embeds to zeros, as in tensor2tensor.

API (d = hidden_size, h heads, V vocabulary, L = the self-attention cache length):

* ``call({"inputs", "targets"}, training=False)`` -> float32 logits [b, t, V].
* ``attention_weights(features)`` -> {"encoder_self": [[b, h, s, s]] * N,
  "decoder_self": [[b, h, t, t]] * N, "encdec": [[b, h, t, s]] * N} (teacher forced).
* ``encode(inputs, training=False)`` -> (memory [b, s, d], memory_mask bool [b, s]).
* Incremental decoding, the searches' step interface (``t2t_lite.decoding.step``, which
  this model implements without importing it; ``plan`` a ``t2t_lite.decoding.DecodingPlan``,
  of which the model reads ``beam_size`` = k and ``growing_cache``):
  ``decoding_state(inputs, L, plan)`` -> (ids, states, sentence_states), the fields of a
  ``DecodingState``: ids int32 [b] zeros (the start symbol); states {"decoder":
  {"layer_i": {"self_k" [b, h, L, d_k], "self_v" [b, h, L, d_v]}}} (preallocated to L, or
  [b, h, 0, d] growing by a position per step with ``plan.growing_cache``);
  sentence_states {"memory_mask" [b, s], "decoder": {"layer_i": {"encdec_k"
  [b, h, s, d_k], "encdec_v" [b, h, s, d_v]}}}, computed once per sentence.
  ``decode_step(ids [n], step, states, sentence_states, plan)`` -> (float32 logits [n, V],
  new states); ``ids`` is the decoder input at position ``step`` of each of the n rows,
  which hold n / b hypotheses of each sentence (sentence-major; any number with k > 1,
  exactly one with k = 1). Usable in ``tf.while_loop`` under
  ``tf.function(jit_compile=True)`` with a preallocated cache.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple, Union

import keras
import tensorflow as tf
from keras import ops

from t2t_lite.data.vocab import EOS_ID, PAD_ID
from t2t_lite.hparams_lib import HParams
from t2t_lite.layers.embedding import (LearnedPositionEmbedding, SharedEmbedding,
                                       SinusoidalPositionEncoding)
from t2t_lite.layers.transformer_layers import Decoder, Encoder
from t2t_lite.registry import register_model


def layer_kwargs(hparams: HParams) -> Dict[str, Any]:
    """Constructor arguments of ``EncoderLayer``/``DecoderLayer`` (and the ``layer_config``
    of ``Encoder``/``Decoder``) from ``hparams``: the layers take plain numbers, the model
    maps its hparams onto them (``dropout`` is P_drop, ``layer_prepostprocess_dropout``)."""
    return dict(hidden_size=hparams.hidden_size, filter_size=hparams.filter_size,
                num_heads=hparams.num_heads, key_channels=hparams.key_channels,
                value_channels=hparams.value_channels,
                dropout=hparams.layer_prepostprocess_dropout,
                attention_dropout=hparams.attention_dropout,
                relu_dropout=hparams.relu_dropout,
                layer_norm_position=hparams.layer_norm_position,
                layer_norm_epsilon=hparams.layer_norm_epsilon)


def shift_right(targets):
    """targets [b, t] -> decoder input [b, t]: 0 (start symbol), targets[:, :-1]."""
    return ops.pad(targets, ((0, 0), (1, 0)), constant_values=PAD_ID)[:, :-1]


@register_model("transformer")
class Transformer(keras.Model):
    """Encoder-decoder Transformer built from ``hparams`` (an ``HParams`` or its dict)."""

    def __init__(self, hparams: Union[HParams, Dict[str, Any]], vocab_size: int, **kwargs):
        super().__init__(**kwargs)
        if isinstance(hparams, dict):
            hparams = HParams.from_dict(hparams)
        if vocab_size <= EOS_ID:
            raise ValueError(f"vocab_size must exceed {EOS_ID} (pad 0, EOS 1), "
                             f"got {vocab_size}")
        self.hparams = hparams
        self.vocab_size = vocab_size
        d = hparams.hidden_size
        policy = self.dtype_policy
        self.embedding = SharedEmbedding(vocab_size, d,
                                         hparams.shared_embedding_and_softmax_weights,
                                         pad_id=PAD_ID, name="embedding", dtype=policy)
        if hparams.pos == "timing":
            self.input_positions = SinusoidalPositionEncoding(d, name="timing_signal",
                                                              dtype=policy)
            self.target_positions = self.input_positions
        else:
            self.input_positions = LearnedPositionEmbedding(
                hparams.max_length, d, name="inputs_positional_embedding", dtype=policy)
            self.target_positions = LearnedPositionEmbedding(
                hparams.max_length, d, name="targets_positional_embedding", dtype=policy)
        self.embedding_dropout = keras.layers.Dropout(hparams.layer_prepostprocess_dropout,
                                                    dtype=policy)
        config = layer_kwargs(hparams)
        self.encoder = Encoder(hparams.num_hidden_layers, config, name="encoder",
                               dtype=policy)
        self.decoder = Decoder(hparams.num_hidden_layers, config, name="decoder",
                               dtype=policy)

    def build(self, input_shape=None):
        """Creates every weight without running the model."""
        shape = (None, None, self.hparams.hidden_size)
        self.embedding.build()
        for positions in (self.input_positions, self.target_positions):
            if not positions.built:
                positions.build(None)
        self.encoder.build(shape)
        self.decoder.build(shape, shape)

    # Pieces ----------------------------------------------------------------------
    def _embed(self, ids, positions_layer, positions, training):
        """ids [b, n] -> dropout(embedding * sqrt(d) + positions [n, d]) [b, n, d]."""
        x = self.embedding(ids) + positions_layer(positions)[None]
        return self.embedding_dropout(x, training=training)

    def encode(self, inputs, training=False) -> Tuple[tf.Tensor, tf.Tensor]:
        """inputs [b, s] int -> (memory [b, s, d], memory_mask bool [b, s])."""
        inputs = ops.cast(inputs, "int32")
        memory_mask = ops.not_equal(inputs, PAD_ID)
        x = self._embed(inputs, self.input_positions, ops.arange(ops.shape(inputs)[1]),
                        training)
        memory = self.encoder(x, attention_mask=memory_mask[:, None, None, :],
                              training=training)
        return memory, memory_mask

    def _forward(self, features, training, return_attention_weights):
        inputs = ops.cast(features["inputs"], "int32")
        targets = ops.cast(features["targets"], "int32")
        memory_mask = ops.not_equal(inputs, PAD_ID)[:, None, None, :]
        x = self._embed(inputs, self.input_positions, ops.arange(ops.shape(inputs)[1]),
                        training)
        memory, encoder_self = self.encoder(x, attention_mask=memory_mask, training=training,
                                            return_attention_weights=True)
        y = self._embed(shift_right(targets), self.target_positions,
                        ops.arange(ops.shape(targets)[1]), training)
        y, decoder_self, encdec = self.decoder(y, memory, memory_mask=memory_mask,
                                               training=training,
                                               return_attention_weights=True)
        logits = self.embedding.logits(y)
        if return_attention_weights:
            return logits, {"encoder_self": encoder_self, "decoder_self": decoder_self,
                            "encdec": encdec}
        return logits

    def call(self, features, training=False):
        """{"inputs" [b, s], "targets" [b, t]} -> float32 logits [b, t, V]."""
        return self._forward(features, training, False)

    def attention_weights(self, features) -> Dict[str, list]:
        """Teacher-forced attention weights (training=False), one [b, h, q, k] per layer."""
        return self._forward(features, False, True)[1]

    # Incremental decoding: the searches' step interface (t2t_lite.decoding.step) ----
    def decoding_state(self, inputs, max_length, plan) -> Tuple[tf.Tensor, Dict, Dict]:
        """inputs [b, s] int (0-padded) -> (ids [b], states, sentence_states) before the
        first step (a ``DecodingState``'s fields; shapes in the module doc).

        ``max_length`` (L, a Python int) preallocates L self-attention positions per layer
        (fixed shapes, for XLA); with ``plan.growing_cache`` the self-attention caches start
        empty and grow by one position per step (``max_length`` is then unused and may be a
        tensor). The encoder-decoder keys/values and the memory mask are per-sentence
        states: computed once, never tiled to the beams nor reordered."""
        memory, memory_mask = self.encode(inputs, training=False)
        cache_length = 0 if plan.growing_cache else int(max_length)
        if self.hparams.pos == "emb" and cache_length > self.hparams.max_length:
            raise ValueError(f"max_length {cache_length} exceeds the learned positional "
                             f"embedding's max_length {self.hparams.max_length}")
        cache = self.decoder.initial_cache(memory, cache_length)
        states = {"decoder": {name: {"self_k": layer["self_k"], "self_v": layer["self_v"]}
                              for name, layer in cache.items()}}
        sentence_states = {"memory_mask": ops.cast(memory_mask, "bool"),
                           "decoder": {name: {"encdec_k": layer["encdec_k"],
                                              "encdec_v": layer["encdec_v"]}
                                       for name, layer in cache.items()}}
        start = ops.zeros((ops.shape(inputs)[0],), "int32")   # the start symbol, PAD_ID
        return start, states, sentence_states

    def decode_step(self, ids, step, states: Dict, sentence_states: Dict, plan
                    ) -> Tuple[tf.Tensor, Dict]:
        """ids [n] int (decoder input at ``step``), step int32 scalar, the states and
        sentence states of ``decoding_state`` -> (float32 logits [n, V] for the next
        token, new states).

        The self-attention caches are written at ``step`` (preallocated, [n, h, L, d]) or
        appended to ([n, h, step, d] in, [n, h, step + 1, d] out, ``plan.growing_cache``).
        With ``plan.beam_size`` k > 1 the n rows hold n / b' hypotheses of each of the b'
        sentences of ``sentence_states`` (sentence-major), whose queries attend to their
        sentence's memory together."""
        ids = ops.cast(ids, "int32")[:, None]
        step = ops.cast(step, "int32")
        x = self._embed(ids, self.target_positions, ops.reshape(step, (1,)), False)
        memory_mask = sentence_states["memory_mask"][:, None, None, :]
        cache = {name: {**layer, **sentence_states["decoder"][name]}
                 for name, layer in states["decoder"].items()}
        y, new_cache = self.decoder.step(x, step, cache, memory_mask,
                                         beam_size=plan.beam_size,
                                         growing=plan.growing_cache)
        logits = self.embedding.logits(y)[:, 0, :]
        return logits, {"decoder": {
            name: {"self_k": layer["self_k"], "self_v": layer["self_v"]}
            for name, layer in new_cache.items()}}

    # Serialisation ---------------------------------------------------------------
    def get_config(self):
        return {"name": self.name, "hparams": self.hparams.to_dict(),
                "vocab_size": self.vocab_size,
                "dtype": keras.dtype_policies.serialize(self.dtype_policy)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(HParams.from_dict(config.pop("hparams")), **config)
