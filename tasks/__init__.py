"""diffreason.tasks"""
