"""The load scenarios of the suite: an open-loop server, PoSt under sealing load, a concurrency sweep.

``test_prove`` keeps a fixed number of proofs in flight (a closed loop, MLPerf's "offline").
These ask what a storage provider loses money on: ``server`` the highest Poisson arrival rate
whose p99 latency stays within its bound (MLPerf's "server", found by search); ``priority``
whether a WinningPoSt or WindowPoSt still meets its bound while sealing proofs saturate the
daemon; ``sweep`` how throughput grows with the proofs in flight, and where it stops growing
(perf_analyzer's concurrency range). ``execution`` runs them for the suite's fixtures.
"""
