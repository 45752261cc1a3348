"""Our journal next to DBOS and LangGraph's SqliteSaver: same run, same folder, same disk.

Three measurements per system (see bench/_peer_systems.py for what each system does):

- ``single``: the median step of one run (constant 20-message context, one ~200-byte
  message out per step), next to the floor (one single-row WAL + synchronous=FULL commit);
- ``concurrent``: steps/s with 32 runs at once (threads; ours also through the server's
  asyncio facade);
- ``growing``: bytes stored per step while the history grows by one message per step, in
  the first and the second half of the run (flat: the second half costs what the first
  did; quadratic: about three times as much).

Each system runs in a child process of its own (one framework's background threads
never run while another is measured), with the floor (one single-row commit in a file of
the same folder) taken before each step of ``single`` and ``growing`` and before and after
``concurrent``. Every database (ours, the peers', the floor's) starts with a pregrown WAL
(bench/_common.py pregrow_wal), so all commit in the same regime; ``--wal fresh`` starts
them from empty files. The peers' packages live in their own venv (bench/setup_peers.sh);
without it only ``--systems ours`` runs.

    bash bench/setup_peers.sh                      # once: bench/.venv-peers
    .venv/bin/python bench/peers.py [--systems ours,dbos,langgraph] [--steps N]
        [--runs N] [--run-steps N] [--growing-steps N] [--wal grown|fresh] [--dir PATH]
        [--json] [--smoke]

Prints a table, then one JSON document (the last line of output).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common
import _peer_systems

SYSTEMS = ("ours", "dbos", "langgraph")
PEERS_VENV = Path(__file__).resolve().parent / ".venv-peers"
PEERS_PYTHON_ENV = "A0_BENCH_PEERS_PYTHON"


def peers_python() -> Path | None:
    """The interpreter that has the peers' packages, or None."""
    chosen = os.environ.get(PEERS_PYTHON_ENV)
    candidate = Path(chosen) if chosen else PEERS_VENV / "bin" / "python"
    return candidate if candidate.exists() else None


# the child process ----------------------------------------------------------------------
def worker(system: str, folder: Path, sizes: dict[str, Any]) -> dict[str, Any]:
    """Measure one system, with the floor next to each measurement."""
    folder.mkdir(parents=True, exist_ok=True)
    floor = _common.Floor(folder, wal=sizes["wal"])
    floor.samples(20)  # warm the floor file up
    half = sizes["floor_samples"] // 2
    bench = _peer_systems.SYSTEMS[system](folder, sizes["wal"])
    out: dict[str, Any] = {"system": system, "settings": bench.settings}
    try:
        for case, call in (
            ("single", lambda: bench.single(sizes["steps"])),
            ("concurrent", lambda: bench.concurrent(sizes["runs"], sizes["run_steps"])),
            ("growing", lambda: bench.growing(sizes["growing_steps"])),
        ):
            if case == "concurrent":  # no floor among 32 runs: sampled before and after
                floor_ns = floor.samples(half)
                data = call()
                floor_ns += floor.samples(half)
            else:  # one floor commit before each step
                bench.interleave(floor.sample)
                data = call()
                floor_ns = bench.floor_ns
                bench.interleave(None)
            data["floor"] = _common.stats(floor_ns)
            data["step"] = _common.stats(data.pop("latencies_ns"))
            if "elapsed_ns" in data:
                data["steps_per_s"] = data["step"]["count"] / (data.pop("elapsed_ns") / 1e9)
            extra = data.get("asyncio")
            if extra:
                extra["step"] = _common.stats(extra.pop("latencies_ns"))
                extra["steps_per_s"] = extra["step"]["count"] / (extra.pop("elapsed_ns") / 1e9)
            out[case] = data
    finally:
        close = getattr(bench, "close", None)
        if close is not None:
            close()
        floor.close()
    return out


# the parent -----------------------------------------------------------------------------
def _run_worker(python: Path, system: str, folder: Path, sizes: dict[str, Any]) -> dict[str, Any]:
    command = [
        str(python),
        str(Path(__file__).resolve()),
        "--worker",
        system,
        "--folder",
        str(folder / system),
        "--sizes",
        json.dumps(sizes),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the {system} worker failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ratios(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each peer against ours: how many times slower / fewer steps / more bytes."""
    ours = results.get("ours")
    ratios: dict[str, Any] = {}
    for name, peer in results.items():
        if name == "ours" or ours is None:
            continue
        ratios[name] = {
            "single_step_median": peer["single"]["step"]["median_us"]
            / ours["single"]["step"]["median_us"],
            "concurrent_steps_per_s_ours_over_peer": ours["concurrent"]["steps_per_s"]
            / peer["concurrent"]["steps_per_s"],
            "growing_bytes_second_half": peer["growing"]["bytes_per_step_second_half"]
            / ours["growing"]["bytes_per_step_second_half"],
        }
    return ratios


def _derive(result: dict[str, Any]) -> None:
    single = result["single"]
    single["ratio_to_floor"] = single["step"]["median_us"] / single["floor"]["median_us"]
    growing = result["growing"]
    first = growing["bytes_first_half"] / growing["steps_first_half"]
    second = growing["bytes_second_half"] / growing["steps_second_half"]
    growing["bytes_per_step_first_half"] = first
    growing["bytes_per_step_second_half"] = second
    growing["growth"] = second / first if first else None


def run_bench(folder: Path, systems: list[str], sizes: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    peer_python = peers_python()
    results: dict[str, dict[str, Any]] = {}
    for system in systems:
        python = peer_python if peer_python is not None else Path(sys.executable)
        results[system] = _run_worker(python, system, folder, sizes)
        _derive(results[system])
    return {
        "bench": "peers",
        "folder": str(folder),
        "sizes": sizes,
        "environment": _common.environment(),
        "python_of_workers": str(peer_python or sys.executable),
        "systems": results,
        "ratios": _ratios(results),
        "growth_if_quadratic": _peer_systems.quadratic_growth(sizes["growing_steps"]),
        "seconds": time.monotonic() - started,
    }


def table(result: dict[str, Any]) -> str:
    rows = [
        (
            "system",
            "step p50 us",
            "p99 us",
            "x floor",
            "floor us",
            "commits/step",
            f"steps/s @{result['sizes']['runs']}",
            "bytes/step 1st",
            "2nd half",
            "growth",
        )
    ]
    for name, r in result["systems"].items():
        single, conc, grow = r["single"], r["concurrent"], r["growing"]
        commits = single.get("commits_per_step")
        rows.append(
            (
                name,
                f"{single['step']['median_us']:.0f}",
                f"{single['step']['p99_us']:.0f}",
                f"{single['ratio_to_floor']:.2f}",
                f"{single['floor']['median_us']:.0f}",
                "-" if commits is None else f"{commits:.2f}",
                f"{conc['steps_per_s']:.0f}",
                f"{grow['bytes_per_step_first_half']:.0f}",
                f"{grow['bytes_per_step_second_half']:.0f}",
                f"{grow['growth']:.2f}x" if grow["growth"] else "-",
            )
        )
        if "asyncio" in conc:
            steps_per_s = conc["asyncio"]["steps_per_s"]
            rows.append(
                (f"{name} (asyncio facade)", "", "", "", "", "", f"{steps_per_s:.0f}", "", "", "")
            )
    lines = [_common.render(rows)]
    for name, ratio in result["ratios"].items():
        lines.append(
            f"{name} vs ours: single step {ratio['single_step_median']:.2f}x ours; ours does "
            f"{ratio['concurrent_steps_per_s_ours_over_peer']:.2f}x its steps/s at "
            f"{result['sizes']['runs']} runs; it stores "
            f"{ratio['growing_bytes_second_half']:.2f}x our bytes per step (2nd half)"
        )
    lines.append(
        f"load average {result['environment']['load_average']}; {result['seconds']:.1f}s; "
        "growth = bytes per step in the 2nd half over the 1st (flat 1.0, whole history per "
        f"step {result['growth_if_quadratic']:.2f})"
    )
    return "\n".join(lines)


def _systems(text: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = sorted(set(chosen) - set(SYSTEMS))
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"systems are {', '.join(SYSTEMS)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", type=_systems, default=list(SYSTEMS))
    parser.add_argument("--steps", type=int, default=300, help="steps of the single run")
    parser.add_argument("--runs", type=int, default=32, help="concurrent runs (default 32)")
    parser.add_argument("--run-steps", type=int, default=30, help="steps of each concurrent run")
    parser.add_argument("--growing-steps", type=int, default=300, help="steps of the growing run")
    parser.add_argument("--floor-samples", type=int, default=60, help="floor commits per case")
    parser.add_argument(
        "--wal",
        choices=_common.WAL_MODES,
        default="grown",
        help="every database and the floor on a pregrown WAL (default) or fresh",
    )
    parser.add_argument("--dir", type=Path, help="folder on the disk to measure (a temp dir)")
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=json.loads, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.folder, args.sizes), sort_keys=True))
        return 0
    if args.smoke:
        args.steps, args.runs, args.run_steps, args.growing_steps = 20, 4, 5, 20
        args.floor_samples = 6
    if min(args.steps, args.growing_steps) < 10 or min(args.runs, args.run_steps) < 1:
        parser.error("--steps and --growing-steps must be at least 10, the others at least 1")
    if set(args.systems) - {"ours"} and peers_python() is None:
        print(
            "the peers' venv is missing: run `bash bench/setup_peers.sh` first "
            "(or pass --systems ours)",
            file=sys.stderr,
        )
        return 2
    sizes = {
        "steps": args.steps,
        "runs": args.runs,
        "run_steps": args.run_steps,
        "growing_steps": args.growing_steps,
        "floor_samples": args.floor_samples,
        "wal": args.wal,
    }
    folder = Path(tempfile.mkdtemp(prefix="peers-bench-", dir=args.dir))
    try:
        result = run_bench(folder, args.systems, sizes)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not args.json:
        print(table(result))
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    os.umask(0o077)
    raise SystemExit(main())
