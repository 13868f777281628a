"""Schedules: per-rank steps of transfers, built per algorithm, verified, executed and priced."""
