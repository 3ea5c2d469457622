"""Flows: graphs of runs that the application builds while they run.

A flow's members are runs; a dependency edge ``upstream → downstream`` keeps the
downstream ``blocked`` until its *join* is satisfied (every upstream completed, any one,
or at least k), and a join that can no longer be satisfied cancels it with
``dependency_failed``, which propagates downstream. Each change to the graph (a member,
an edge, a join) bumps the flow's ``revision``, and a writer may stage an edge against
the revision it read (compare-and-set): :class:`~workflows.errors.StaleRevision` when
the graph moved.

The modules:

- :mod:`.joins`: the join rules and their verdict on the upstreams' statuses;
- :mod:`.graph`: members, edges and joins as written by the verbs (lock order, checks);
- :mod:`.members`: ``create_flow`` (``_once``), ``add_to_flow_once``;
- :mod:`.edges`: ``add_dependency_once``, ``set_join``;
- :mod:`.settle`: a member's end settles its downstream members; blocked members start
  or fail; the flow ends; the scanner's backstop;
- :mod:`.close`: ``seal_flow``, ``cancel_flow``.

**Locks, and why no member starts twice or stays blocked, and nothing deadlocks.**
The flow row is locked (``FOR NO KEY UPDATE``, so the foreign-key checks of flow events
written meanwhile do not wait for it) before any run, by the verbs that change the graph,
and never by a transition that holds a run (a member's end leaves the flow's own end to
a transition of its own, after commit). Runs are locked upstream before downstream, as a
child run is locked before its parent; a verb checks an edge against the graph (which
its flow lock keeps still) before it locks a run, so it never waits for a member it
would then refuse. A transition settling the downstream members of a run that ended
never *waits* for a downstream run: one another transaction holds is decided right after
commit, by a transition that holds nothing else (two members failing at once, whose
cancellations meet further downstream, would otherwise wait for each other); so is a
member whose workflow has ``max_concurrent_runs``, as taking a place may wait for the
slots that the end of another workflow's run holds.

A blocked member is decided only under its run's lock, from the statuses its upstream
runs have committed: of two upstreams ending at once on different workers, the second
to take the downstream's lock, or the after-commit decision of the one that found it
held, sees the first's end. Staging an edge locks the upstream's run before reading its
status, so an upstream ending at that moment is either seen ended (it committed first)
or sees the new edge when it ends (the staging committed first). The ``repair_flows``
scanner decides any blocked member whose join is decided, for the cases no transition
saw (a process that died between a commit and its after-commit work).
"""
