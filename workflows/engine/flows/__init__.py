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
- :mod:`.members`: ``create_flow``, ``add_to_flow``;
- :mod:`.edges`: ``add_dependency``, ``set_join``;
- :mod:`.settle`: a member's end settles its downstream members; blocked members start
  or fail; the flow ends; the scanner's backstop;
- :mod:`.close`: ``seal_flow``, ``cancel_flow``.

**Locks, and why no member starts twice or stays blocked.** Runs are locked upstream
before downstream, as a child run is locked before its parent; the flow row is locked
before any run by the verbs that change the graph, and never by a transition that holds
a run (a member's end reads its downstream members and leaves the flow's own end to a
transition of its own, after commit). A blocked member is decided only under its run's
lock, from the statuses its upstream runs have committed: of two upstreams ending at
once on different workers, the second to take the downstream's lock sees the first's
end. Staging an edge locks the upstream's run before reading its status, so an upstream
ending at that moment is either seen ended (it committed first) or sees the new edge
when it ends (the staging committed first). The ``repair_flows`` scanner decides any
blocked member whose join is decided, for the cases no transition saw (a process that
died between a commit and the next batch).
"""
