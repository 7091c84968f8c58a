"""beekeeper: provision, build, place, render and verify a local LLM server."""

__version__ = "0.1.0"
