"""OpenAI-compatible HTTP server (chat and text completions with Predicted Outputs) over the AsyncEngine."""

from foretell.server.app import build_app

__all__ = ["build_app"]
