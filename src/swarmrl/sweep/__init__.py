"""Sweeps: grids of configs and the results table."""
