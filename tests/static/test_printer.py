"""Printed programs of a small model zoo against golden text (tinygrad's process-replay idea).

Each model is built inside ``program_guard`` and ``str(program)`` is compared with
``tests/static/golden/<name>.txt``, so a change to tracing, inference or printing that alters a
program shows up as a readable diff. After checking that a change is intended, rewrite the
golden files with::

    HYBRIDFW_UPDATE_GOLDEN=1 python -m pytest tests/static/test_printer.py
"""
import difflib
import os
import re
from pathlib import Path

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("HYBRIDFW_UPDATE_GOLDEN") == "1"


# ---- the zoo: each builder returns (program, feed arrays, fetch variables, eager function) ----
def _mlp():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    feeds = {"x": np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)}

    def forward(x):
        return (nn.functional.softmax(model(x), dim=-1),)
    return forward, {"x": [None, 4]}, feeds


def _cnn():
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
    model.eval()
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 1, 8, 8)).astype(np.float32)}

    def forward(x):
        return (model(x),)
    return forward, {"x": [None, 1, 8, 8]}, feeds


def _lstm_cell():
    cell = nn.LSTMCell(3, 5)
    rng = np.random.default_rng(2)
    feeds = {n: rng.standard_normal(s).astype(np.float32)
             for n, s in (("x", (2, 3)), ("h", (2, 5)), ("c", (2, 5)))}

    def forward(x, h, c):
        return cell(x, (h, c))
    return forward, {"x": [2, 3], "h": [2, 5], "c": [2, 5]}, feeds


def _transformer_encoder_layer():
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    layer.eval()  # no dropout: the program is deterministic
    feeds = {"src": np.random.default_rng(3).standard_normal((5, 2, 8)).astype(np.float32)}

    def forward(src):
        return (layer(src),)
    return forward, {"src": [5, 2, 8]}, feeds


ZOO = {"mlp": _mlp, "cnn": _cnn, "lstm_cell": _lstm_cell,
       "transformer_encoder_layer": _transformer_encoder_layer}


def build(name):
    """(program, feeds, fetch variables, eager outputs) for a zoo model, seeded."""
    hf.manual_seed(0)
    forward, shapes, feeds = ZOO[name]()
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        fetch = forward(*[hf.static.data(n, s, "float32") for n, s in shapes.items()])
    eager = forward(*[hf.tensor(a) for a in feeds.values()])
    return prog, feeds, list(fetch), list(eager)


def _all_ops(prog):
    return [op for block in prog.blocks for op in block.ops]


# ---- tests ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(ZOO))
def test_printed_program_matches_golden(name):
    text = str(build(name)[0]) + "\n"
    path = GOLDEN_DIR / f"{name}.txt"
    if UPDATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"no golden file {path}; create it with HYBRIDFW_UPDATE_GOLDEN=1")
    golden = path.read_text()
    if text != golden:
        diff = "".join(difflib.unified_diff(golden.splitlines(True), text.splitlines(True),
                                            f"golden/{name}.txt", "current"))
        pytest.fail(f"the printed {name} program changed (if intended, rerun with "
                    f"HYBRIDFW_UPDATE_GOLDEN=1):\n{diff}", pytrace=False)


@pytest.mark.parametrize("name", list(ZOO))
def test_printing_is_deterministic(name):
    assert str(build(name)[0]) == str(build(name)[0])


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_program_runs_like_eager(name):
    """The golden programs are worth keeping: each computes what the eager model does."""
    prog, feeds, fetch, eager = build(name)
    got = hf.static.Executor().run(prog, feed=feeds, fetch_list=fetch, return_numpy=True)
    assert len(got) == len(eager)
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g, e.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(ZOO))
def test_to_dot_is_graphviz(name):
    prog = build(name)[0]
    dot = prog.to_dot()
    assert dot.startswith("digraph")
    depth = 0
    for ch in dot:  # braces balance and never close more than they opened
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0 and dot.rstrip().endswith("}")
    nodes = re.findall(r"^\s*(op\d+) \[shape=box", dot, re.MULTILINE)
    assert len(nodes) == len(set(nodes)) == len(_all_ops(prog))
    declared = set(nodes) | set(re.findall(r'^\s*("[^"]+") \[shape=ellipse', dot, re.MULTILINE))
    for src, dst in re.findall(r'^\s*(\S+) -> (\S+);', dot, re.MULTILINE):
        assert src in declared and dst in declared, f"edge {src} -> {dst} to an unknown node"


def test_to_dot_draws_sub_blocks_as_clusters_and_escapes_names():
    # the ops of a loop body were drawn loose, unconnected to their while; a quote in an
    # input's name ended its DOT string early
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data('in"put', [3])
        _, y = hf.static.nn.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0),
                                       [hf.tensor(0), x])
    dot = prog.to_dot()
    assert r'"in\"put" [shape=ellipse];' in dot
    assert '"in"put"' not in dot
    while_node = re.search(r'^\s*(op\d+) \[shape=box, label="while', dot, re.MULTILINE).group(1)
    clusters = re.findall(r"subgraph cluster_\d+ \{(.*?)\n  \}", dot, re.DOTALL)
    assert len(clusters) == 2 and all('label="while: block' in c for c in clusters)
    assert any('label="mul' in c for c in clusters)  # the body's ops are inside its cluster
    assert re.search(rf"^\s*{while_node} -> op\d+ \[style=dashed, lhead=cluster_", dot,
                     re.MULTILINE)
