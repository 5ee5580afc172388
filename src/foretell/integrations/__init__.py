"""Integrations of foretell's draft sources with other serving engines (each imports its engine lazily)."""
