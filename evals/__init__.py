"""diffreason.evals"""
