import pytest


@pytest.fixture
def tiny_text_dir(tmp_path):
    """A folder holding a small ``input.txt`` (the ``char`` corpus) for tiny end-to-end LM runs."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("Abishai and Asahel went up. Abishai saw Asahel. " * 40)
    return data
