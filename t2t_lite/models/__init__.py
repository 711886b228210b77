"""Registered models."""
