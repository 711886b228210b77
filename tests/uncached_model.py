"""The reference search's view of a Transformer: next-token logits from the full,
uncached, teacher-forced model (``model({"inputs", "targets"})``), with no decode cache and
no decode step, so that a test comparing the library's cached search with
``reference_beam_search`` checks the cache as well as the search."""
import numpy as np
import tensorflow as tf


def uncached_logits_fn(model, inputs, eos_bias: float = 0.0):
    """``logits_fn(sentence, prefixes) -> logits [len(prefixes), V]`` (float32) for the
    sentences ``inputs`` int32 [b, s]: each prefix's next-token logits, EOS's raised by
    ``eos_bias``."""
    inputs = np.asarray(inputs)
    forward = tf.function(
        lambda sources, targets: model({"inputs": sources, "targets": targets},
                                       training=False),
        input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2, autograph=False)

    def logits_fn(sentence, prefixes):
        lengths = [len(prefix) for prefix in prefixes]
        targets = np.zeros([len(prefixes), max(lengths) + 1], np.int32)
        for row, prefix in enumerate(prefixes):
            targets[row, :len(prefix)] = prefix
        sources = np.repeat(inputs[sentence:sentence + 1], len(prefixes), axis=0)
        logits = forward(tf.constant(sources), tf.constant(targets)).numpy()
        logits = logits[np.arange(len(prefixes)), lengths]             # [n, V]
        logits[:, 1] += np.float32(eos_bias)
        return logits

    return logits_fn
