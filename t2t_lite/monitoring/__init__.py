"""Attention monitoring: probes, statistics and pictures of what the heads attend to.

``attention`` computes weights and statistics, ``rendering`` draws heatmaps,
``summaries`` writes them to TensorBoard during training, ``html_report`` writes the
decoder's ``--attention_dir`` (PNGs and an interactive page).
"""
