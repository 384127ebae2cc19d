"""Spark Arena's benchmark profiles as published: the keys and values of
`benchmarking/spark-arena-v1.yaml` and `benchmarking/spark-arena-v2.yaml` of
https://github.com/spark-arena/recipe-registry at commit 7aff4a2
(7aff4a2dd12d6e02d10aa99270f87e8816c94479, the v2 revision that added `runs: 3`), which is
under the MIT License, Copyright (c) 2026 Spark-Arena.com. The files' own comments are left
out (v2's names the script and strategy that made its schedule: sparkctl/core/arena.py says
so in its words). Tests parse these and check what sparkctl holds and runs against them."""

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
