"""The machine pytest runs on: its GPUs through NVML, its processes' memory, its identity, its cache folders.

Shared by the plugin and the reference engine, so it imports only ``vocab``.
"""
