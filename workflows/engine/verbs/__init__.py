"""Operator verbs as transitions: cancel, retry, skip, pause, terminate, rerun, priority,
dismiss and undismiss, set a business key."""
