"""Community results in and out: llama-benchy files recorded as runs of kind `import`
(llama_benchy.py), shown beside sparkctl's own runs at the same depth (community.py), and
Spark Arena submission bundles written from sparkctl's runs (arena_export.py)."""
