"""notebooks/*.ipynb run top to bottom in a real Jupyter kernel against the demo store.

The store path reaches the notebooks through their parameters cell (``AEGIS_STORE`` etc. in the
environment, which the kernel inherits).  Notebooks are committed without outputs.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner
from nbclient import NotebookClient

from aegis_slurm.cli import main

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    res = CliRunner().invoke(main, ["demo", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("name", ["monthly_review.ipynb", "capacity_planning.ipynb"])
def test_notebook_runs_top_to_bottom(name: str, demo_dir: Path, monkeypatch: pytest.MonkeyPatch):
    path = NOTEBOOKS / name
    nb = nbformat.read(path, as_version=4)
    # Committed clean: no outputs, no execution counts.
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), name
    assert "parameters" in code[0].metadata.get("tags", [])

    monkeypatch.setenv("AEGIS_STORE", str(demo_dir / "store"))
    monkeypatch.setenv("AEGIS_EVENTS", str(demo_dir / "history" / "sacct.events.txt"))
    monkeypatch.setenv("AEGIS_SIGNALS", str(demo_dir / "history" / "sacct.signals.parquet"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    outputs = [o for c in code for o in c.outputs]
    text = "\n".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    images = sum("image/png" in o.get("data", {}) for o in outputs)
    if name == "monthly_review.ipynb":
        assert "2024-01:" in text and "r_f:" in text
        assert images >= 6  # the report's figures, drawn in the notebook
    else:
        # Measured in the report's month (not the fallback), interval carried, queue measured.
        assert "r_f in 2024-01 = " in text and "per 1000 node-days (90% CI" in text
        assert "queue wait after an interruption:" in text and "(90%:" in text
        # The plan at both ends of the r_f interval.
        assert "r_f 90% low: optimal interval" in text and "r_f 90% high: optimal" in text
        assert images >= 2
