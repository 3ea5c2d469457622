"""Retention: deleting the history of ended runs in small, self-contained batches.

:mod:`.batches` deletes one batch of whole runs in one transaction (its statements are
:mod:`workflows.engine.sql.retention`'s); :mod:`.pacing` sizes the next batch from the
time the last one took. The loop over batches, with its bounds and progress, is
:mod:`workflows.services.retention`'s.
"""
