"""Verdicts on figures: the gates, whether a figure changed, how far a build's runs lie apart.

It imports ``run`` and the rooms below.
"""
