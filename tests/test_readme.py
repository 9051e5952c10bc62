"""The README stays true: its quickstart runs, and it gives exactly the two set-up commands."""
import re
import runpy
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_quickstart_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    for i, code in enumerate(blocks):
        # each block runs as a file of its own, as a user pasting it into a script would
        # (hf.jit.to_static reads the source of the functions it converts)
        script = tmp_path / f"readme_block_{i + 1}.py"
        script.write_text(code)
        runpy.run_path(str(script), run_name="__main__")
    assert (tmp_path / "model.hf").exists()


def test_two_setup_commands():
    commands = [line.strip() for line in README.splitlines() if line.startswith("    pip install")]
    assert commands == ["pip install -e '.[demo]' && python -m hybridfw.demo",
                        "pip install -e '.[dev]' && python -m pytest -n 2 tests"]
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "pip install -q -e '.[dev]' && python -m pytest -n 2 tests" in ci
