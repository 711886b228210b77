"""Benchmark: the search with two layouts of its tensors, A/B on the same weights.

    python scripts/bench_cache_layout.py [--quantize=int8] [--jit_compile] [--rounds=5]
    python scripts/bench_cache_layout.py --layout=softmax_weights [--rounds=15]

Times ``scripts/benchmark.py decode``'s search (by default its work: base dimensions,
V = 37,000, 32 sentences x 24 source tokens, beam 4, every hypothesis forced to 30
tokens, encoder-decoder keys and values once per sentence) on the same random weights
twice in one process, interleaved ``--rounds`` times: with the
library's attention, whose keys and values are head-major ([b, h, positions, d], batched
matmuls over (b, h) read them in place), and with the layout used before issue #16
(token-major [b, positions, h, d], which TensorFlow's einsum transposes at every step for
the self-attention cache and the memory keys/values alike). Prints each one's median
seconds, the speed-up, and whether both searches returned the same ids. The baseline is
installed by replacing five ``MultiHeadAttention`` methods after the first search is
traced, so both searches run the same model code otherwise.

``--layout=softmax_weights`` instead compares the pre-softmax projection as the library
runs it (x @ the stored [V, d] weights read transposed) with a [d, V] copy of the weights
made once, outside the search (float32 without XLA: oneDNN's MatMul is the one whose
speed depends on the layout, and ``scripts/bench_decode_parts.py`` times both products
alone). It prints the same lines plus the largest score difference; a speed-up below 1
means the copy is faster.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "scripts")):
    if path not in sys.path:
        sys.path.insert(0, path)

from t2t_lite.flag_fields import positive_int  # noqa: E402  (no TensorFlow)


def install_token_major_layout() -> None:
    """Replaces the attention layer's projections, core, cache and step with the
    token-major versions (keys/values [b, positions, h, d])."""
    from keras import ops
    from t2t_lite.layers.attention import MultiHeadAttention, large_negative

    def project_self(self, x):
        qkv = self._matmul(x, "qkv_kernel")
        kc = self.key_channels
        return (self._split_heads(qkv[..., :kc], self.key_depth),
                self._split_heads(qkv[..., kc:2 * kc], self.key_depth),
                self._split_heads(qkv[..., 2 * kc:], self.value_depth))

    def project_memory(self, memory):
        kv = self._matmul(ops.cast(memory, self.compute_dtype), "kv_kernel")
        kc = self.key_channels
        return (self._split_heads(kv[..., :kc], self.key_depth),
                self._split_heads(kv[..., kc:], self.value_depth))

    def attend(self, q, k, v, mask=None, training=False):
        q = q * ops.cast(self.key_depth ** -0.5, q.dtype)
        logits = ops.cast(ops.einsum("bqhd,bkhd->bhqk", q, k), "float32")
        if mask is not None:
            logits = ops.where(mask, logits, large_negative("float32"))
        # One key (the first step, traced with static shapes): softmax is 1, as the
        # library's attend says without Keras's warning about a size-1 softmax axis.
        weights = (ops.ones_like(logits) if logits.shape[-1] == 1
                   else ops.softmax(logits, axis=-1))
        context = ops.einsum("bhqk,bkhd->bqhd", ops.cast(weights, self.compute_dtype), v)
        shape = ops.shape(context)
        context = ops.reshape(context, (shape[0], shape[1], self.value_channels))
        return self._matmul(context, "output_kernel"), weights

    def initial_cache(self, batch_size, max_length):
        dtype = self.compute_dtype
        return {"k": ops.zeros((batch_size, max_length, self.num_heads, self.key_depth), dtype),
                "v": ops.zeros((batch_size, max_length, self.num_heads, self.value_depth),
                               dtype)}

    def self_attention_step(self, x, step, cache, growing=False):
        q, k, v = self.project_self(x)
        if growing:
            keys = ops.concatenate([cache["k"], k], axis=1)
            values = ops.concatenate([cache["v"], v], axis=1)
            return self.attend(q, keys, values)[0], {"k": keys, "v": values}
        step = ops.cast(step, "int32")
        keys = ops.slice_update(cache["k"], (0, step, 0, 0), k)
        values = ops.slice_update(cache["v"], (0, step, 0, 0), v)
        visible = (ops.arange(ops.shape(keys)[1]) <= step)[None, None, None, :]
        return self.attend(q, keys, values, visible)[0], {"k": keys, "v": values}

    MultiHeadAttention.project_self = project_self
    MultiHeadAttention.project_memory = project_memory
    MultiHeadAttention.attend = attend
    MultiHeadAttention.initial_cache = initial_cache
    MultiHeadAttention.self_attention_step = self_attention_step


def install_softmax_weights_copy() -> None:
    """Replaces ``SharedEmbedding.logits`` (float32) with a product against a [d, V]
    copy of its weights, made eagerly the first time it is traced (outside the search)."""
    import tensorflow as tf
    from keras import ops
    from t2t_lite.layers.embedding import SharedEmbedding

    def logits(self, x):
        with tf.init_scope():
            if getattr(self, "_columns_copy", None) is None:
                object.__setattr__(self, "_columns_copy",   # untracked by Keras
                                   tf.transpose(tf.convert_to_tensor(self.softmax_weights)))
        return ops.cast(ops.matmul(x, self._columns_copy), "float32")

    SharedEmbedding.logits = logits


LAYOUTS = {  # --layout: (title, library's name, replacement's name, installs the replacement)
    "attention_cache": ("cache layout", "head-major", "token-major",
                        install_token_major_layout),
    "softmax_weights": ("softmax weights layout", "[V, d] read transposed", "[d, V] copy",
                        install_softmax_weights_copy),
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--layout", default="attention_cache", choices=sorted(LAYOUTS))
    import benchmark
    benchmark.add_search_variant_flags(parser)
    parsed = parser.parse_args(argv)
    if parsed.layout == "softmax_weights" and parsed.quantize != "none":
        parser.error("--layout=softmax_weights compares float32 weights; drop --quantize")
    if parsed.layout == "softmax_weights" and parsed.jit_compile:
        parser.error("--layout=softmax_weights compares the search without XLA (XLA "
                     "chooses its own layout); drop --jit_compile")
    hparams, args, tf = benchmark.setup_search(parser, parsed)
    title, library, replacement, install = LAYOUTS[parsed.layout]
    print(f"{title} A/B: quantize={parsed.quantize} {benchmark.describe(args, tf)}",
          flush=True)
    # the first traced as the library is, the second with the replacement installed
    (first, (first_ids, first_scores)), (second, (second_ids, second_scores)) = \
        benchmark.same_weight_searches(args, hparams, install)
    print(f"identical ids: {bool((first_ids == second_ids).all())}", flush=True)
    if parsed.layout == "softmax_weights":
        print(f"largest score difference: {float(abs(first_scores - second_scores).max()):g}")
    medians = benchmark.interleaved_medians({library: first, replacement: second},
                                            parsed.rounds)
    new, old = medians[library], medians[replacement]
    print(f"{library} {new:.3f} s, {replacement} {old:.3f} s (median of {parsed.rounds}): "
          f"speed-up {old / new:.3f}x")


if __name__ == "__main__":
    main()
