"""Presentation: number formats and ranks, the static site, plots, generated docs, skips."""
