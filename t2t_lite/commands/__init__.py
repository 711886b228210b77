"""Command-line entry points; each command parses its own flags."""
