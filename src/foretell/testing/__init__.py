"""Tiny random-weight models and a byte-level tokenizer, built from a config: for tests and smoke runs."""

from foretell.testing.tiny import make_tiny_model, make_tiny_tokenizer, save_tiny_model_dir

__all__ = ["make_tiny_model", "make_tiny_tokenizer", "save_tiny_model_dir"]
