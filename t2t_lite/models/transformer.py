"""The Transformer (Vaswani et al., 2017) as a Keras 3 model, in tensor2tensor's style.

Conventions: pad id 0, EOS id 1 (``PAD_ID``, ``EOS_ID`` of ``t2t_lite.data.vocab``, the
vocabulary contract). ``inputs`` [b, s] int32 0-padded, ending with EOS; ``targets``
[b, t] int32 0-padded, ending with EOS. The decoder input is the targets
shifted right by one with 0 as the start symbol; the padding id (and so the start
symbol) embeds to zeros, as in tensor2tensor.

API (d = hidden_size, h heads, V vocabulary, L = max_decode_length):

* ``call({"inputs", "targets"}, training=False)`` -> float32 logits [b, t, V].
* ``attention_weights(features)`` -> {"encoder_self": [[b, h, s, s]] * N,
  "decoder_self": [[b, h, t, t]] * N, "encdec": [[b, h, t, s]] * N} (teacher forced).
* ``encode(inputs, training=False)`` -> (memory [b, s, d], memory_mask bool [b, s]).
* ``initial_decode_cache(memory, memory_mask, L)`` -> nested dict, every tensor with
  leading dim b: {"decoder": {"layer_i": {"self_k" [b, h, L, d_k], "self_v" [b, h, L, d_v],
  "encdec_k" [b, h, s, d_k], "encdec_v" [b, h, s, d_v]}}, "memory_mask" [b, s]};
  L = 0 gives self-attention caches that grow by one position per step.
* ``decode_step(ids [b], step, cache)`` -> (float32 logits [b, V], new cache); ``ids``
  is the decoder input at position ``step`` (0, the start symbol, at step 0). Usable in
  ``tf.while_loop`` under ``tf.function(jit_compile=True)``.
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

    # Incremental decoding --------------------------------------------------------
    def initial_decode_cache(self, memory, memory_mask, max_decode_length: int) -> Dict:
        """The cache for ``decode_step``; every tensor has leading dim b.

        ``max_decode_length`` L > 0 preallocates L self-attention positions per layer
        (fixed shapes, for XLA; decode with ``growing=False``); 0 starts empty
        self-attention caches that grow by one position per step (cheaper without XLA;
        decode with ``growing=True``)."""
        max_decode_length = int(max_decode_length)
        if self.hparams.pos == "emb" and max_decode_length > self.hparams.max_length:
            raise ValueError(f"max_decode_length {max_decode_length} exceeds the learned "
                             f"positional embedding's max_length {self.hparams.max_length}")
        return {"decoder": self.decoder.initial_cache(memory, max_decode_length),
                "memory_mask": ops.cast(memory_mask, "bool")}

    def decode_step(self, ids, step, cache: Dict, beam_size: int = 1, growing: bool = False
                    ) -> Tuple[tf.Tensor, Dict]:
        """ids [b] int (decoder input at ``step``), step int32 scalar ->
        (float32 logits [b, V] for the next token, new cache).

        ``growing`` says which cache ``initial_decode_cache`` made: False, preallocated
        (self-attention keys/values [b, h, L, d] written at ``step``); True, growing
        ([b, h, step, d] in, [b, h, step + 1, d] out).

        With ``beam_size`` n > 1, ``ids`` and the self-attention caches hold n hypotheses
        per sentence (sentence-major, [b*n, ...]) while ``memory_mask`` and the
        encoder-decoder ``encdec_k``/``encdec_v`` stay [b, ...]: computed once per
        sentence, never tiled to the beams nor reordered (``split_memory_cache``,
        ``beam_decode_step``)."""
        ids = ops.cast(ids, "int32")[:, None]
        step = ops.cast(step, "int32")
        x = self._embed(ids, self.target_positions, ops.reshape(step, (1,)), False)
        memory_mask = cache["memory_mask"][:, None, None, :]
        y, decoder_cache = self.decoder.step(x, step, cache["decoder"], memory_mask,
                                             beam_size=beam_size, growing=growing)
        logits = self.embedding.logits(y)[:, 0, :]
        return logits, {"decoder": decoder_cache, "memory_mask": cache["memory_mask"]}

    @staticmethod
    def split_memory_cache(cache: Dict) -> Tuple[Dict, Dict]:
        """An ``initial_decode_cache`` -> (search states, per-sentence constants): the
        states hold only the self-attention caches (``self_k``/``self_v`` [b, h, L, d],
        tiled to the beams and reordered each step by beam search); the constants hold
        ``memory_mask`` [b, s] and every layer's ``encdec_k``/``encdec_v`` [b, h, s, d],
        to be captured by the step function (``beam_decode_step``) rather than carried as
        loop states."""
        states = {"decoder": {}}
        constants = {"memory_mask": cache["memory_mask"], "decoder": {}}
        for name, layer in cache["decoder"].items():
            states["decoder"][name] = {"self_k": layer["self_k"], "self_v": layer["self_v"]}
            constants["decoder"][name] = {"encdec_k": layer["encdec_k"],
                                          "encdec_v": layer["encdec_v"]}
        return states, constants

    def beam_decode_step(self, constants: Dict, beam_size: int, growing: bool = False):
        """``symbols_to_logits_fn(ids [b*n], step, states) -> (logits [b*n, V], states)``
        for ``beam_search`` (n = ``beam_size``) or ``greedy_search`` (n = 1) over the states
        of ``split_memory_cache``, reading the per-sentence ``constants``; ``growing`` as
        ``decode_step`` (pass the search ``growing_states=growing`` too)."""
        step_fn = self.sentence_decode_step(beam_size, growing)
        return lambda ids, step, states: step_fn(ids, step, states, constants)

    def sentence_decode_step(self, beam_size: int, growing: bool = False):
        """``(ids [b*n], step, states, constants) -> (logits [b*n, V], states)``: as
        ``beam_decode_step``, with the per-sentence ``constants`` of ``split_memory_cache``
        ([b, ...]) passed in, for ``beam_search(..., sentence_states=constants)`` (which
        may drop finished sentences from them)."""
        def step_fn(ids, step, states, constants):
            cache = {"memory_mask": constants["memory_mask"],
                     "decoder": {name: {**layer, **constants["decoder"][name]}
                                 for name, layer in states["decoder"].items()}}
            logits, new_cache = self.decode_step(ids, step, cache, beam_size=beam_size,
                                                 growing=growing)
            return logits, {"decoder": {
                name: {"self_k": layer["self_k"], "self_v": layer["self_v"]}
                for name, layer in new_cache["decoder"].items()}}
        return step_fn

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
