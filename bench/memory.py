"""Peak memory and time of one training step of a deep MLP: plain eager, eager checkpointing,
and the static recompute pass under a memory budget.  Run by hand::

    python bench/memory.py                                  # N = 8..128, width 1024, batch 256
    python bench/memory.py --sizes 8,16,32 --width 256 --batch 64 --out /tmp/memory.png

The model: N x (Linear(width, width) + ReLU), loss ``(out * out).mean()``; one step is forward +
backward. Modes:

* ``eager``        no checkpointing;
* ``ckpt``         ``hf.memory.checkpoint_sequential`` over the N layers, round(sqrt(N)) segments;
* ``static``       ``hf.jit.to_static(model)``;
* ``static-sqrt``  ``hf.jit.to_static(model, memory_budget='sqrt')``;
* ``static-<f>``   ``hf.jit.to_static(model, memory_budget=B)`` with B = f x the activation bytes
  of the un-checkpointed chain (N x batch x width x 4), for each f of ``--budgets``.

What is measured (separate, instrumented steps; times come from un-instrumented steps, every
mode of one N timed in interleaved rounds so that they see the same machine load):

* **peak activation bytes** -- the most memory the step holds beyond the parameters, the input
  and the parameter gradients, as ``hf.memory`` counts it.  Gradients are taken out because they
  all stay alive as ``p.grad`` (a static backward program also returns them all at its end): at
  width 1024 / batch 256 a layer's weight gradient (4 MiB) is four times its activation
  (1 MiB), so the raw step peak is mostly gradients and says little about activations.
  Exact, from a timeline of every tensor storage ``hf.memory`` counts, created or freed during
  the step: the highest (live bytes - live bytes of the storages that end up as ``p.grad``);
  ``hf.memory.peak()`` cross-checks the timeline's raw peak.  For static modes the executor's
  arenas (counted by ``hf.memory`` since compile time, before the step) are added, and the
  values the forward leaves for the backward are in the timeline (``hf.memory`` counts them).
* **step peak** -- everything the step holds above its start, gradients included (plus the
  arenas for static programs), twice: as ``hf.memory.peak()`` sees it, and from what numpy
  really allocates (numpy reports every data buffer to ``tracemalloc``), which also sees the
  temporaries numpy makes inside kernels and a static program's heap values that ``hf.memory``
  does not count.  The two agreeing is the check that ``hf.memory``'s figures can be trusted.
  For static modes the parts are printed: ``saved`` (bytes the forward run leaves for backward,
  program inputs excluded; the forward's output, which the backward reads too, is in it, while
  the recompute report counts it under ``input_bytes``) and ``arenas``.
* **bwd peak** -- the backward program's own run, comparable with the recompute report's
  ``planned_backward_peak_bytes`` (kept values + inputs + the backward arena): the arrays it is
  fed (the seed gradient excluded) + its arena + what numpy allocates while it runs (tracemalloc),
  minus the gradients it returns.
* **planned bwd peak** -- the report's ``planned_backward_peak_bytes`` (static modes with a
  budget).

Targets (issue 6): log-log slope of peak activation bytes vs N <= 0.6 with checkpointing (about
1.0 without); at N = 64 the checkpointed peak activation bytes <= 25% of the plain run's; step time
<= 1.4x the plain run's; under a byte budget the measured peak within 10% of the plan.
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import hybridfw as hf
from hybridfw import backend, nn

MB = 1 << 20


# ---- the model ---------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, depth, width):
        super().__init__()
        # one block per layer, so checkpoint_sequential splits N layers (not 2N modules)
        self.body = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU())
                                    for _ in range(depth)])

    def forward(self, x):
        return self.body(x)


class CheckpointedMLP(MLP):
    def __init__(self, depth, width, segments):
        super().__init__(depth, width)
        self.segments = segments

    def forward(self, x):
        return checkpoint_sequential()(list(self.body), self.segments, x)


def checkpoint_sequential():
    fn = getattr(hf.memory, "checkpoint_sequential", None)
    if fn is None:
        try:
            from hybridfw.memory.checkpoint import checkpoint_sequential as fn
        except ImportError:
            raise Unavailable("hf.memory.checkpoint_sequential is not there") from None
    return fn


def loss_of(out):
    return (out * out).mean()


# ---- measuring eager steps: a timeline of tensor storages --------------------------------------
class StorageTimeline:
    """Records (id, +nbytes) when a tensor storage is created and (id, -nbytes) when it dies,
    by wrapping ``hybridfw.backend.Storage`` for the duration of a ``with`` block."""

    def __enter__(self):
        self.events = []
        events = self.events
        cls = backend.Storage
        self._init, self._del = cls.__init__, cls.__del__
        init, dele = self._init, self._del

        def __init__(s, nbytes, dev):
            init(s, nbytes, dev)
            events.append((id(s), nbytes))

        def __del__(s):
            events.append((id(s), -s.nbytes))
            dele(s)

        cls.__init__, cls.__del__ = __init__, __del__
        return self

    def __exit__(self, *exc):
        backend.Storage.__init__, backend.Storage.__del__ = self._init, self._del

    def peaks(self, grad_storages):
        """(raw peak, peak excluding the storages in ``grad_storages``) above the start."""
        grad_ids = {id(s) for s in grad_storages}
        # a grad storage is alive at the end, so its creation is the last creation of its id
        born = {}
        for k, (sid, nb) in enumerate(self.events):
            if nb > 0 and sid in grad_ids:
                born[sid] = k
        birth_steps = set(born.values())
        live = grads = raw = act = 0
        for k, (_sid, nb) in enumerate(self.events):
            live += nb
            if k in birth_steps:
                grads += nb
            raw = max(raw, live)
            act = max(act, live - grads)
        return raw, act


def grads_to_none(model):
    for p in model.parameters():
        p.grad = None


def grad_storages(model):
    return [p.grad._storage for p in model.parameters() if p.grad is not None]


def grad_bytes(model):
    return sum(backend.root_array(p.grad._data).nbytes for p in model.parameters()
               if p.grad is not None)


def tracemalloc_peak(fn, peaks):
    """Peak bytes numpy and Python allocate while ``fn()`` runs, above the level at its start;
    ``fn`` appends the peak so far to ``peaks`` before any ``tracemalloc.reset_peak()``."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        out = fn()
        return max([*peaks, tracemalloc.get_traced_memory()[1]]) - start, out
    finally:
        tracemalloc.stop()


# ---- static programs: arenas and saved values --------------------------------------------------
def static_entry(model):
    """The ConcreteProgram of the last call of a converted model."""
    return model.forward._last


def arena_bytes(entry):
    """Bytes of the forward and backward arenas of ``entry`` (compiled, cached plans), and
    ``total``: of the distinct arenas (the plans of one executor share one)."""
    progs = {id(entry.program): "forward"}
    if getattr(entry, "backward_program", None) is not None:
        progs[id(entry.backward_program)] = "backward"
    out = {"forward": 0, "backward": 0}
    distinct = {}
    for compiled in entry.executor._cache.values():
        kind = progs.get(id(compiled.program))
        if kind is not None:
            out[kind] = max(out[kind], int(compiled.arena.nbytes))
            distinct[id(compiled.arena)] = int(compiled.arena.nbytes)
    out["total"] = sum(distinct.values())
    return out


def saved_bytes(out, only=None):
    """Bytes the forward run of a static program left for its backward (RunState.saved); with
    ``only`` (arrays), just the part that is those arrays (the program inputs)."""
    node = out._node
    if node is None or not node.saved or node.saved[0] is None:
        return 0
    keep = None if only is None else {id(backend.root_array(a)) for a in only}
    roots = {}
    for a in getattr(node.saved[0], "saved", ()):
        r = backend.root_array(a)
        if keep is None or id(r) in keep:
            roots[id(r)] = r.nbytes
    return sum(roots.values())


def report_of(model):
    entry = static_entry(model)
    return None if entry is None else getattr(entry, "recompute_report", None)


def _get(report, *names):
    for n in names:
        v = report.get(n) if isinstance(report, dict) else getattr(report, n, None)
        if v is not None:
            return v
    return None


def planned_peak(report):
    if report is None:
        return None
    v = _get(report, "planned_backward_peak_bytes", "planned_peak_bytes")
    return None if v is None else int(v)


def recomputed_count(report):
    if report is None:
        return None
    v = _get(report, "recomputed_ops", "recomputed", "recompute_ops")
    if v is None:
        return None
    return v if isinstance(v, int) else len(v)


# ---- one configuration -------------------------------------------------------------------------
class Unavailable(Exception):
    pass


def build(mode, depth, width, batch, budget_fraction=None):
    hf.manual_seed(0)
    if mode == "eager":
        return MLP(depth, width)
    if mode == "ckpt":
        checkpoint_sequential()
        return CheckpointedMLP(depth, width, max(1, round(math.sqrt(depth))))
    model = MLP(depth, width)
    if mode == "static":
        return hf.jit.to_static(model)
    budget = "sqrt" if mode == "static-sqrt" else budget_of(budget_fraction, depth, width, batch)
    try:
        return hf.jit.to_static(model, memory_budget=budget)
    except TypeError as exc:
        raise Unavailable(f"to_static(memory_budget=...) is not there ({exc})") from None


def chain_bytes(depth, width, batch):
    """Activation bytes of the chain: one (batch, width) float32 per layer."""
    return depth * batch * width * 4


def budget_of(fraction, depth, width, batch):
    if fraction > 1:
        return int(fraction)           # an absolute byte budget
    return int(fraction * chain_bytes(depth, width, batch))


def measure(mode, depth, width, batch, repeat, budget_fraction=None):
    model = build(mode, depth, width, batch, budget_fraction)
    x = hf.randn(batch, width)
    static = mode.startswith("static")

    def step():
        out = model(x)
        loss_of(out).backward()
        return out

    try:
        step()                                   # warm-up (trace and compile)
    except Exception as exc:
        raise Unavailable(f"{type(exc).__name__}: {exc}") from exc
    times = []
    for _ in range(repeat):
        grads_to_none(model)
        gc.collect()
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    row = {"mode": mode, "N": depth, "time": min(times)}

    # step peak (numpy level), and the static pieces
    grads_to_none(model)
    holder, peaks = {}, []

    def instrumented():
        out = model(x)
        holder["saved"] = saved_bytes(out) if static else 0
        holder["saved_inputs"] = saved_bytes(out, only=[x._data]) if static else 0
        loss_of(out).backward()

    if static:
        entry = static_entry(model)
        run_backward = entry.run_backward

        def watched(arrays):
            # the backward program's own run: its inputs (saved values, program inputs, seeds),
            # and what numpy allocates while it runs (its heap values, gradients included)
            holder["program_inputs"] = sum({id(backend.root_array(a)): backend.root_array(a).nbytes
                                            for a in arrays}.values())
            holder["seeds"] = sum(a.nbytes for a in arrays[len(entry.saved_names):])
            at, peak = tracemalloc.get_traced_memory()
            peaks.append(peak)
            tracemalloc.reset_peak()
            grads = run_backward(arrays)  # (it drops the saved values as it goes)
            peak = tracemalloc.get_traced_memory()[1]
            peaks.append(peak)
            holder["program_extra"] = peak - at
            holder["program_grads"] = sum(g.nbytes for g in grads if g is not None)
            return grads

        entry.run_backward = watched
    try:
        tm_peak, _ = tracemalloc_peak(instrumented, peaks)
    finally:
        if static:
            del entry.run_backward
    gbytes = grad_bytes(model)
    # hf.memory's own figures, from a timeline of the storages it counts (for static programs
    # that includes the values the forward leaves for the backward; the arenas, counted too,
    # were allocated at compile time, before the step)
    grads_to_none(model)
    gc.collect()
    before = hf.memory.allocated()
    hf.memory.reset_peak()
    with StorageTimeline() as tl:
        step()
    hf_peak = hf.memory.peak() - before
    raw, act = tl.peaks(grad_storages(model))
    if raw != hf_peak:
        print(f"  note: {mode} N={depth}: timeline peak {raw} != hf.memory.peak() delta "
              f"{hf_peak}", file=sys.stderr)
    row["hf_peak"] = hf_peak
    if static:
        entry = static_entry(model)
        arenas = arena_bytes(entry)
        row["arenas"] = arenas["total"]
        row["saved"] = holder["saved"] - holder["saved_inputs"]
        row["step_peak"] = tm_peak + row["arenas"]
        row["act_peak"] = act + row["arenas"]
        row["hf_peak"] = hf_peak + row["arenas"]
        # the backward run: what it was fed (saved values and inputs), its arena, and whatever
        # else numpy held beyond the level before backward, gradients excluded
        row["bwd_peak"] = (holder["program_inputs"] - holder["seeds"] + arenas["backward"]
                           + holder["program_extra"] - holder["program_grads"])
        row["seeds"] = holder["seeds"]
        report = report_of(model)
        row["planned"] = planned_peak(report)
        row["planned_saved"] = None if report is None else report.saved_bytes
        row["recomputed"] = recomputed_count(report)
        if mode != "static":
            row["budget"] = "sqrt" if mode == "static-sqrt" else budget_of(
                budget_fraction, depth, width, batch)
    else:
        row["step_peak"] = tm_peak
        row["act_peak"] = act
    row["_step"] = (model, step)   # for interleaved timing (main); dropped after it
    return row


def interleaved_times(rows, repeat):
    """Re-time the steps of ``rows`` (one N) in interleaved rounds, so every mode sees the same
    machine load; each row's ``time`` becomes its best round."""
    live = [r for r in rows if "_step" in r]
    best = {id(r): math.inf for r in live}
    for _ in range(repeat):
        for r in live:
            model, step = r["_step"]
            grads_to_none(model)
            gc.collect()
            t = time.perf_counter()
            step()
            best[id(r)] = min(best[id(r)], time.perf_counter() - t)
    for r in live:
        r["time"] = best[id(r)]
        del r["_step"]


# ---- reporting ---------------------------------------------------------------------------------
def slope(points):
    """Least-squares slope of log(bytes) vs log(N)."""
    pts = [(math.log(n), math.log(b)) for n, b in points if b and b > 0]
    if len(pts) < 2:
        return float("nan")
    xs, ys = zip(*pts)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((a - mx) ** 2 for a in xs)
    return sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / den if den else float("nan")


def fmt_mb(v):
    return "-" if v is None else f"{v / MB:.2f}"


def table(rows):
    head = ("| mode | N | time (s) | peak act (MiB) | step peak: hf.memory / tracemalloc (MiB) "
            "| saved (MiB) "
            "| arenas (MiB) | bwd peak (MiB) | planned bwd peak (MiB) | meas/plan | recomputed |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['mode']} | {r['N']} | n/a: {r['error']} |" + " |" * 8)
            continue
        plan = r.get("planned")
        ratio = f"{r['bwd_peak'] / plan:.3f}" if plan else "-"
        rec = r.get("recomputed")
        saved = fmt_mb(r.get("saved"))
        if r.get("planned_saved") is not None:
            saved += f" (plan {fmt_mb(r['planned_saved'])})"
        lines.append(f"| {r['mode']} | {r['N']} | {r['time']:.3f} | {fmt_mb(r['act_peak'])} | "
                     f"{fmt_mb(r['hf_peak'])} / {fmt_mb(r['step_peak'])} | {saved} | {fmt_mb(r.get('arenas'))} | "
                     f"{fmt_mb(r.get('bwd_peak'))} | {fmt_mb(plan)} | {ratio} | "
                     f"{'-' if rec is None else rec} |")
    return "\n".join(lines)


def summary(rows, modes, sizes):
    ok = {(r["mode"], r["N"]): r for r in rows if "error" not in r}
    lines = ["", ("Log-log slope of peak activation bytes vs N (least squares over "
                  f"N = {', '.join(map(str, sizes))}):"), ""]
    lines.append("| mode | slope | target |")
    lines.append("|---|---|---|")
    for m in modes:
        pts = [(n, ok[(m, n)]["act_peak"]) for n in sizes if (m, n) in ok]
        fixed = m.startswith("static-") and m != "static-sqrt"
        target = ("~1.0" if m in ("eager", "static") else
                  "n/a (a budget proportional to N)" if fixed else "<= 0.6")
        s = slope(pts)
        verdict = "" if math.isnan(s) or not target.startswith("<=") else (
            " ok" if s <= 0.6 else " MISSED")
        lines.append(f"| {m} | {s:.3f} | {target}{verdict} |")
    ref_n = 64 if 64 in sizes else max(sizes)
    lines += ["", (f"At N = {ref_n}" + ("" if ref_n == 64 else " (64 not run; target is at 64)")
                   + ": against the un-checkpointed run of the same kind (eager / static)"), "",
              "| mode | peak act / plain (target <= 0.25) | time / plain (target <= 1.4) |",
              "|---|---|---|"]
    for m in modes:
        if m in ("eager", "static"):
            continue
        base = ok.get(("eager" if m == "ckpt" else "static", ref_n))
        r = ok.get((m, ref_n))
        if not base or not r:
            lines.append(f"| {m} | n/a | n/a |")
            continue
        a, t = r["act_peak"] / base["act_peak"], r["time"] / base["time"]
        if m.startswith("static-") and m != "static-sqrt":   # a budget: its own figure
            lines.append(f"| {m} | {a:.3f} (n/a: the budget sets it) | "
                         f"{t:.2f}x{' ok' if t <= 1.4 else ' MISSED'} |")
            continue
        lines.append(f"| {m} | {a:.3f}{' ok' if a <= 0.25 else ' MISSED'} | "
                     f"{t:.2f}x{' ok' if t <= 1.4 else ' MISSED'} |")
    planned = [r for r in rows if "error" not in r and r.get("planned")]
    if planned:
        lines += ["", ("Static recompute pass, measured vs planned (target: within 10%): the "
                       "backward program run's peak (its inputs but the seed + its arena + "
                       "other non-gradient arrays) against the report's "
                       "planned_backward_peak_bytes; the kept bytes against saved_bytes; and "
                       "the whole step's peak activation bytes against the byte budget:"), "",
                  ("| mode | N | budget (MiB) | planned bwd peak | measured bwd peak | diff "
                   "| saved plan / measured | step peak act / budget |"),
                  "|---|---|---|---|---|---|---|---|"]
        for r in planned:
            d = r["bwd_peak"] / r["planned"] - 1
            b = r.get("budget")
            over = "-" if isinstance(b, str) or not b else f"{r['act_peak'] / b:.2f}x"
            lines.append(f"| {r['mode']} | {r['N']} | {b if isinstance(b, str) else fmt_mb(b)} | "
                         f"{fmt_mb(r['planned'])} | {fmt_mb(r['bwd_peak'])} | {d:+.1%}"
                         f"{' ok' if abs(d) <= 0.10 else ' MISSED'} | "
                         f"{fmt_mb(r['planned_saved'])} / {fmt_mb(r['saved'])} | {over} |")
    return "\n".join(lines)


def plot(rows, modes, sizes, path, width, batch):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"\n(matplotlib is not importable: no plot written to {path})")
        return None
    ok = {(r["mode"], r["N"]): r for r in rows if "error" not in r}
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for m in modes:
        pts = [(n, ok[(m, n)]["act_peak"] / MB) for n in sizes if (m, n) in ok]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=f"{m} (slope {slope(pts):.2f})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("layers N")
    ax.set_ylabel("peak activation MiB")
    ax.set_title(f"One training step, MLP width {width}, batch {batch}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"\nplot written to {path}")
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="8,16,32,64,128", help="layer counts N (comma separated)")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--budgets", default="0.5,0.25",
                   help="byte budgets: fractions of N*batch*width*4 (<= 1) or bytes (> 1)")
    p.add_argument("--modes", default="eager,ckpt,static,static-sqrt,budgets",
                   help="which modes ('budgets' = one static mode per --budgets entry)")
    p.add_argument("--repeat", type=int, default=3,
                   help="timed rounds per N, every mode once per round, interleaved (the best "
                        "step of each mode is reported)")
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "hybridfw_memory.png"),
                   help="where the PNG goes")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    fractions = [float(s) for s in args.budgets.split(",") if s]
    configs = []
    for m in args.modes.split(","):
        if m == "budgets":
            configs += [(f"static-{f:g}", f) for f in fractions]
        elif m:
            configs.append((m, None))
    modes = [m for m, _ in configs]
    threads = os.environ.get("OMP_NUM_THREADS") or os.environ.get("OPENBLAS_NUM_THREADS")
    print(f"# bench/memory.py: MLP N x (Linear({args.width}, {args.width}) + ReLU), batch "
          f"{args.batch}, loss mean(out^2); N = {sizes}; time: best of {args.repeat} interleaved "
          f"rounds; "
          f"numpy {np.__version__}, {os.cpu_count()} CPUs, BLAS threads "
          f"{threads or 'default'}")
    print(f"# one layer's activation: {fmt_mb(args.batch * args.width * 4)} MiB; its weight "
          f"gradient {fmt_mb(args.width * (args.width + 1) * 4)} MiB; byte budgets: "
          + ", ".join(f"{f:g} x N x activation" if f <= 1 else f"{int(f)} B" for f in fractions))
    print()
    rows = []
    for n in sizes:
        first = len(rows)
        for mode, frac in configs:
            t0 = time.perf_counter()
            try:
                r = measure(mode, n, args.width, args.batch, args.repeat, frac)
            except Unavailable as exc:
                r = {"mode": mode, "N": n, "error": str(exc).splitlines()[0][:120]}
            rows.append(r)
            print(f"  {mode:12s} N={n:<4d} done in {time.perf_counter() - t0:6.1f} s",
                  file=sys.stderr, flush=True)
        interleaved_times(rows[first:], args.repeat)
    print(table(rows))
    print(summary(rows, modes, sizes))
    plot(rows, modes, sizes, args.out, args.width, args.batch)
    return rows


if __name__ == "__main__":
    main()
