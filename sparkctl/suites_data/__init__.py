"""The quality suites as published, shipped inside the package so evals work on a machine with
no network: GSM8K's test split (MIT, LICENSE-gsm8k.txt) and IFEval's input prompts
(Apache-2.0, LICENSE-ifeval.txt). SHA256SUMS lists every file here in `sha256sum` format
(`sha256sum -c SHA256SUMS` checks an installed copy by hand). Read through
sparkctl.services.evals.suites; nothing here is Python but this docstring."""
