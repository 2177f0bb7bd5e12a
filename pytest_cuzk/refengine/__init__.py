"""The reference proving engine: a cuzk.v1 daemon that really proves Groth16 on small circuits.

``prover`` (setup, PCE, synthesis, proving), ``verify`` (checking its proofs from
the request), ``gendata`` (deterministic test data), ``circuits`` (one reference
circuit per proof kind) and the daemon around them.
"""
