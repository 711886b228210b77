"""Keras layers of the Transformer."""
