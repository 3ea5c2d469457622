"""Loops inside a run (``Loop`` nodes and polling tasks): a new iteration of the steps a
loop runs again, what each finished iteration did kept as a ``StepIteration`` row.

The loop node's own entry is :mod:`workflows.engine.nodes.loop`'s; a polling task's
round trip (complete, ask ``repeat_until``, sleep on a timer, run again) is
:mod:`.polling`'s; what both do past ``max_iterations`` is :mod:`.bounds`'s.
"""
