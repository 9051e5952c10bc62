"""The README stays true: its quickstart runs, and it gives exactly the two set-up commands."""
import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_quickstart_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    for i, code in enumerate(blocks):
        exec(compile(code, f"README.md python block {i + 1}", "exec"), {})
    assert (tmp_path / "model.hf").exists()


def test_two_setup_commands():
    commands = [line.strip() for line in README.splitlines() if line.startswith("    pip install")]
    assert commands == ["pip install -e '.[demo]' && python -m hybridfw.demo",
                        "pip install -e '.[dev]' && python -m pytest -n 2 tests"]
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "pip install -q -e '.[dev]' && python -m pytest -n 2 tests" in ci
