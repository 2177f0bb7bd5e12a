"""Where finished cases go: the terminal report and its tables, the plots, the database recorder.

It imports ``verdicts`` and the rooms below; ``html`` builds on it.
"""
