"""Suite scoring: pure functions that turn a model response into the verdicts of a reference implementation."""
