"""What traces cost a step: the inline step rate with OpenTelemetry absent, with its API
but no SDK (the API's no-op provider), and with the SDK recording every span.

Each mode runs in a process of its own (an SDK provider can be set once per process, and
"absent" must keep ``import opentelemetry`` from succeeding), on a fresh temporary SQLite
file set up like the demo's: ``--runs`` runs of a 10-step no-op workflow are started,
then executed by ``run_pending`` (a worker chaining through each run's steps). The modes
take turns, ``--rounds`` times, so a machine whose speed drifts drifts for all of them;
the medians and their ratios to "absent" are printed, in steps/s and in CPU ms per step.

* ``absent``: a meta-path finder refuses ``opentelemetry``, as in a project without the
  ``otel`` extra;
* ``noop``: the API is importable and no SDK was set up (Flowsite makes no span: one
  check per span site);
* ``sdk``: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` exporting to the
  in-memory exporter: every run's start and every attempt is a span, ended and exported
  synchronously in the worker (a ``BatchSpanProcessor`` would export on a thread);
* ``sampled``: the same with the sampler ``ParentBased(TraceIdRatioBased(0.1))``: one
  run in ten is recorded, the others' attempts get the SDK's non-recording spans.

``--tree`` prints, instead, the trace of one order whose middle step is a child run, as
the in-memory exporter recorded it (docs/operations/traces.md shows it).

The script prints figures and asserts no timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MODES = ("absent", "noop", "sdk", "sampled")
# The share of runs each mode with an SDK records.
SAMPLED = {"sdk": 1.0, "sampled": 0.1}


class _Absent:
    """Refuses every ``opentelemetry`` import: a project without the extra."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] == "opentelemetry":
            raise ImportError(f"No module named {name!r}")


def _recording_provider(ratio: float = 1.0) -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def one_mode(mode: str, runs: int) -> dict[str, float]:
    """Start and run ``runs`` runs in this process under ``mode``; steps/s and CPU."""
    if mode == "absent":
        sys.meta_path.insert(0, _Absent())
    ratio = SAMPLED.get(mode)
    exporter = _recording_provider(ratio) if ratio is not None else None

    from bench.fresh_sqlite import measured_in_fresh_sqlite
    from bench.throughput import STEPS_PER_RUN, execute_pending, start_runs

    def measure() -> dict[str, float]:
        start_runs(runs, "tracing")
        cpu = time.process_time()
        seconds, attempts, _ = execute_pending()
        cpu = time.process_time() - cpu
        if attempts != runs * STEPS_PER_RUN:
            raise SystemExit(f"{attempts} attempts ran, {runs * STEPS_PER_RUN} expected")
        spans = len(exporter.get_finished_spans()) if exporter is not None else 0
        return {
            "steps_per_second": attempts / seconds,
            "cpu_ms_per_step": 1000 * cpu / attempts,
            "spans": spans,
        }

    figures, _ = measured_in_fresh_sqlite(None, measure)
    imported = any(name.startswith("opentelemetry") for name in sys.modules)
    figures["opentelemetry_imported"] = float(imported)
    return figures


def print_tree() -> None:
    """One traced order with a child run, as the in-memory exporter recorded it."""
    exporter = _recording_provider()
    from opentelemetry import trace

    from bench.fresh_sqlite import measured_in_fresh_sqlite
    from tests.support.spans import RecordedSpan, span_tree

    def record() -> str:
        import workflows
        from tests.acceptance.flowapp import traced  # noqa: F401  (registers the order)
        from workflows.testing import run_pending

        tracer = trace.get_tracer("example.web")
        with tracer.start_as_current_span("POST /orders", kind=trace.SpanKind.SERVER):
            workflows.start_run("acceptance_traced_order", {})
        run_pending()
        return span_tree(RecordedSpan.of(span) for span in exporter.get_finished_spans())

    tree, _ = measured_in_fresh_sqlite(None, record)
    print(tree)


def interleaved(rounds: int, runs: int) -> dict[str, list[dict[str, float]]]:
    """Every mode once per round, each in a fresh process, in turn."""
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for round_number in range(1, rounds + 1):
        for mode in MODES:
            done = subprocess.run(
                [sys.executable, __file__, "--mode", mode, "--runs", str(runs)],
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            results[mode].append(figures)
            print(
                f"  round {round_number} {mode:>6}: {figures['steps_per_second']:8.0f} steps/s"
                f"  {figures['cpu_ms_per_step']:.3f} CPU ms/step  {figures['spans']:.0f} spans",
                flush=True,
            )
    return results


def report(results: dict[str, list[dict[str, float]]]) -> None:
    base_rate = statistics.median(r["steps_per_second"] for r in results["absent"])
    base_cpu = statistics.median(r["cpu_ms_per_step"] for r in results["absent"])
    print()
    print(f"  {'mode':<8} {'steps/s':>9} {'ratio':>6} {'CPU ms/step':>12} {'ratio':>6}  imported")
    for mode in MODES:
        rate = statistics.median(r["steps_per_second"] for r in results[mode])
        cpu = statistics.median(r["cpu_ms_per_step"] for r in results[mode])
        imported = "yes" if results[mode][0]["opentelemetry_imported"] else "no"
        print(
            f"  {mode:<8} {rate:9.0f} {rate / base_rate:6.2f} {cpu:12.3f} {cpu / base_cpu:6.2f}"
            f"  {imported}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs of 10 steps per mode")
    parser.add_argument("--rounds", type=int, default=3, help="turns of every mode")
    parser.add_argument("--mode", choices=MODES, help="one mode in this process (internal)")
    parser.add_argument("--tree", action="store_true", help="print one traced order's trace")
    args = parser.parse_args(argv)
    if args.tree:
        print_tree()
        return 0
    if args.mode:
        print(json.dumps(one_mode(args.mode, args.runs)))
        return 0
    print(f"Traces and the inline step rate: {args.runs} runs x 10 steps, {args.rounds} rounds")
    report(interleaved(args.rounds, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
