"""Moved to :mod:`foretell.engine.detok` (one detokenisation module for engine, server and CLI)."""

from foretell.engine.detok import TokenTexts, split_by_tokens

__all__ = ["TokenTexts", "split_by_tokens"]
