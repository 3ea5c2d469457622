"""Every hand-written SQL statement of the engine, one module per job.

Why not the ORM here: on the reference machine, building one ``filter(...).update(...)``
with a few lookups and expressions costs the ORM 0.3-0.5 ms of CPU, several times what
SQLite needs to execute it, and a chained step runs five such statements (see
docs/benchmarks.md). These modules build the same compare-and-set ``UPDATE`` and the
few hot ``SELECT``/``INSERT`` statements from the models' own metadata, adapt values
through the models' own fields, and run on SQLite and PostgreSQL (the two databases
the suite runs on). The limits checked in a claim (``engine/limits/``) keep their logic
and call the statements of :mod:`.limit_rows` and :mod:`.held_units`. Everything else
that is not on the per-step path keeps using the ORM.

The modules, lowest first:

- :mod:`.connection`: which database the statements go to (``engine_alias``,
  ``statements_on``, ``engine_connection``).
- :mod:`.execute`: running a statement on the DB-API cursor inside a transaction.
- :mod:`.adapters`: per-field value adapters (what the database stores for a value).
- :mod:`.identifiers`: the only way a table or column name enters SQL text.
- :mod:`.expressions`: SQL new values of a column (the database clock, ``attempt + n``).
- :mod:`.clock`: reading the database clock (``database_now``).
- :mod:`.rows`: reading step and item rows (``StepRow``, ``ItemRow``).
- :mod:`.locks`: the row-lock clause and locking the run (``lock_run``).
- :mod:`.updates`: compare-and-set updates (``cas_update``, ``cas_update_many``,
  ``move_row``, ``take_items``, ``fenced_update_many``).
- :mod:`.claim_reads`: the reads a claim starts with (``ClaimRow``).
- :mod:`.counters`: a fan-out step's item counters and outputs.
- :mod:`.inserts`: multi-row inserts (``insert_rows``, ``insert_events``).
- :mod:`.locked_updates`: the run's lock and a fenced write of one of its rows, in one
  statement on PostgreSQL (``lock_run_and_update``, ``RowWrite``).
- :mod:`.logged_updates`: a claim that inserts the transition's events, in one statement
  on PostgreSQL (``cas_update_many_logged``, ``RowEvent``).
- :mod:`.limit_rows`: the rows limits count in: concurrency slots (``free_slots``,
  ``slot_count``, ``held_slot_count``, ``empty_unit_slots``, ``empty_run_slots``) and
  rate buckets (``locked_rate_bucket``).
- :mod:`.held_units`: ready work held by a limit (``best_held``,
  ``release_workflow_holds``).
- :mod:`.flow_graph`: whether a flow member reaches another along its edges
  (``reaches``, the cycle check of a new edge).
- :mod:`.notify`: ``NOTIFY`` in the transaction, for wake-ups on commit (``notify``).

**The rule for SQL text.** No value is ever formatted into a statement: every value,
a status constant included, is a ``%s`` parameter. The text is built only from

- literal SQL written in these modules (keywords, the aliases ``u``/``s``/``r`` of a
  statement, the names of its ``WITH`` tables), chosen by code, never by a caller's data;
- table and column names through :func:`.identifiers.table` and
  :func:`.identifiers.column`, which accept only a model of this app and one of its
  concrete fields: the closed set of names the app's migrations create;
- the number of ``%s`` placeholders a list of values needs.

``tests/unit/test_sql_package.py`` pins the rule: no module of the engine outside this
package holds SQL statement text, no module outside it imports a private name from it,
and nothing here quotes a name any other way.
"""
