"""The main demo (README's first command) trains the digits CNN to >= 97% and reloads it."""
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")


def test_digits_demo_reaches_97_percent_and_reloads(tmp_path):
    from hybridfw.demo import train

    path = tmp_path / "digits.hf"
    result = train(save_path=str(path), progress=False)
    assert result["test_accuracy"] >= 0.97, result
    assert result["reloaded_accuracy"] == result["test_accuracy"]
    assert path.exists()
