"""Operator verbs as transitions: cancel, retry, skip, pause, terminate, rerun, priority."""
