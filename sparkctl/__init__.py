"""sparkctl: a terminal workstation manager for local LLM serving on a DGX Spark."""

__version__ = "0.1.0"
