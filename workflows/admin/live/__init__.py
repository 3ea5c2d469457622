"""The console's live view of running work: the run page's progress bars, log tails and
summaries (:mod:`.progress`, kept current in the browser by ``workflows/live.js``), and
the per-step Log page (:mod:`.log`)."""
