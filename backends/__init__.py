"""diffreason.backends"""
