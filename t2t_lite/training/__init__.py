"""Training pieces: loss, metrics, learning-rate schedule, optimizer, and the trainer."""
