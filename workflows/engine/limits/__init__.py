"""Admission limits on work and runs: concurrency slots, rates, usage budgets, run limits."""
