"""Running a case: the case matrix, the plan, the proofs in waves, one case from start to figures.

The plan is windows until stable, within budgets. It imports ``measure`` and the rooms below.
"""
