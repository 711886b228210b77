"""The ways int8 decoding can scale its activations (no TensorFlow).

``quantize_model(activation_scales=...)`` in ``t2t_lite.layers.int8`` takes one of
``ACTIVATION_SCALES``, and the decoder's and exporter's ``--int8_activation_scales`` offers
them before TensorFlow is imported:

- ``mixed``: the sublayers' inputs per tensor, every other input per row;
- ``row``: every input per row, so a sentence translates the same whatever is batched
  with it;
- ``tensor``: every input per tensor.
"""
ACTIVATION_SCALES = ("mixed", "row", "tensor")
DEFAULT_ACTIVATION_SCALES = "mixed"
