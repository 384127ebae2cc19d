"""Spark Arena's benchmark profiles as published (spark-arena/recipe-registry, `benchmarking/`):
the v1 file, and v2 in the revision that added `runs: 3`. Tests parse these and check what
sparkctl holds and runs against them."""

PUBLISHED_V1 = """\
framework: llama-benchy
metadata:
  description: Spark Arena Benchmark Profile v1
args:
  depth: [ 0, 4096, 8192, 16384, 32768, 65535, 100000 ]
  pp: [ 2048 ]
  tg: [ 128 ]
  concurrency: [ 1, 2, 5, 10 ]
  prefix_caching: true
"""

PUBLISHED_V2 = """\
framework: llama-benchy
metadata:
  description: Spark Arena Benchmark Profile v2
args:
  depth: [ 0, 4096, 8192, 16384, 32768, 65535, 100000 ]
  pp: [ 2048 ]
  tg: [ 128 ]
  concurrency: [ 1, 2, 5, 10 ]
  prefix_caching: true
  runs: 3

# Heat-aware schedule generated from sparkrun-internal/benchmark-heat-load.py
# strategy: bucket_43521_seed42 (n_buckets=5, pattern=(4,3,5,2,1), seed=42)
schedule:
  - { depth: 8192, concurrency: 5 }
  - { depth: 4096, concurrency: 5 }
  - { depth: 8192, concurrency: 10 }
  - { depth: 8192, concurrency: 2 }
  - { depth: 4096, concurrency: 2 }
  - { depth: 100000, concurrency: 5 }
  - { depth: 100000, concurrency: 2 }
  - { depth: 65535, concurrency: 10 }
  - { depth: 65535, concurrency: 1 }
  - { depth: 0, concurrency: 1 }
  - { depth: 65535, concurrency: 5 }
  - { depth: 32768, concurrency: 2 }
  - { depth: 4096, concurrency: 10 }
  - { depth: 16384, concurrency: 1 }
  - { depth: 8192, concurrency: 1 }
  - { depth: 32768, concurrency: 5 }
  - { depth: 0, concurrency: 10 }
  - { depth: 16384, concurrency: 10 }
  - { depth: 32768, concurrency: 1 }
  - { depth: 0, concurrency: 5 }
  - { depth: 16384, concurrency: 5 }
  - { depth: 100000, concurrency: 1 }
  - { depth: 32768, concurrency: 10 }
  - { depth: 16384, concurrency: 2 }
  - { depth: 0, concurrency: 2 }
  - { depth: 65535, concurrency: 2 }
  - { depth: 4096, concurrency: 1 }
  - { depth: 100000, concurrency: 10 }
"""
