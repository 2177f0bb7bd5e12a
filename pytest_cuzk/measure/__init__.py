"""Measurement and sampling: memory and GPU samplers, metric counters, statistics, figures.

A finished case's one ``Figures`` record is built from these. It knows nothing of how a case
is run; it imports ``backends`` and the rooms below.
"""
