"""Benchmark: head-major attention caches against the token-major layout they replaced.

    python scripts/bench_cache_layout.py [--quantize=int8] [--jit_compile] [--rounds=5]

Times ``scripts/benchmark.py decode``'s search (by default its work: base dimensions,
V = 37,000, 32 sentences x 24 source tokens, beam 4, every hypothesis forced to 30
tokens, encoder-decoder keys and values once per sentence) on the same random weights
twice in one process, interleaved ``--rounds`` times: with the
library's attention, whose keys and values are head-major ([b, h, positions, d], batched
matmuls over (b, h) read them in place), and with the layout used before issue #16
(token-major [b, positions, h, d], which TensorFlow's einsum transposes at every step for
the self-attention cache and the memory keys/values alike). Prints each one's median
seconds, the speed-up, and whether both searches returned the same ids. The baseline is installed by replacing five
``MultiHeadAttention`` methods after the first search is traced, so both searches run the
same model code otherwise.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "scripts")):
    if path not in sys.path:
        sys.path.insert(0, path)


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
        weights = ops.softmax(logits, axis=-1)
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quantize", default="none", choices=("none", "int8"))
    parser.add_argument("--jit_compile", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--rounds", type=int, default=5)
    import benchmark
    benchmark.add_search_flags(parser)
    parsed = parser.parse_args(argv)
    args = benchmark.search_args(parsed, parsed.quantize, parsed.jit_compile)
    tf = benchmark.setup_tf(args)
    print(f"cache layout A/B: quantize={parsed.quantize} {benchmark.describe(args, tf)}",
          flush=True)
    # the first traced with the library's attention, the second with the old layout
    (head_major, (head_major_ids, _)), (token_major, (token_major_ids, _)) = \
        benchmark.same_weight_searches(args, benchmark.get_hparams(args),
                                       install_token_major_layout)
    print(f"identical ids: {bool((head_major_ids == token_major_ids).all())}", flush=True)
    medians = benchmark.interleaved_medians(
        {"head-major": head_major, "token-major": token_major}, parsed.rounds)
    new, old = medians["head-major"], medians["token-major"]
    print(f"head-major {new:.3f} s, token-major {old:.3f} s (median of {parsed.rounds}): "
          f"speed-up {old / new:.3f}x")


if __name__ == "__main__":
    main()
