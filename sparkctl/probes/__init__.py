"""Blocking readers of this machine: /proc/meminfo + PSI, NVML, host facts.

Importing this package imports neither psutil nor pynvml; they load on first read.
"""

from sparkctl.probes.host import SystemProbes

__all__ = ["SystemProbes"]
