"""``aegis-slurm cbd``: help, text and one-JSON-object output, exit status, read-only state."""

from __future__ import annotations

import json

from click.testing import CliRunner

from aegis_slurm.cli import main

from ._fixtures import FIX, H100_Q, write_cbd_config


def _config(tmp_path, nvidia_smi: str, gpus: int = 8) -> str:
    probes = {
        "nvidia_smi_q": ["cat", nvidia_smi],
        "kernel_log": ["cat", f"{FIX}/gpud/dmesg-with-xid-119.log"],
    }
    return str(
        write_cbd_config(
            tmp_path / "cbd.toml", state_dir=tmp_path / "state", probes=probes, gpus=gpus
        )
    )


def test_help_lists_profiles():
    r = CliRunner().invoke(main, ["cbd", "--help"])
    assert r.exit_code == 0 and "--profile" in r.output and "--json" in r.output


def test_json_is_one_object_and_does_not_consume_xids(tmp_path):
    cfg = _config(tmp_path, str(H100_Q))
    for _ in range(2):  # read-only: the XID is still "new" the second time
        r = CliRunner().invoke(main, ["cbd", "--config", cfg, "--node", "gpu001", "--json"])
        doc = json.loads(r.output)
        v = {x["check"]: x for x in doc["verdicts"]}
        assert v["xid"]["state"] == "fail" and "Xid 119" in v["xid"]["evidence"]
        assert v["gpu_count"]["state"] == "pass"
        assert doc["would_drain"] == ["xid"] and r.exit_code == 3  # a check failed
    assert not (tmp_path / "state" / "gpu001" / "state.json").exists()


def test_text_output_and_exit_zero_when_nothing_fails(tmp_path):
    cfg = _config(tmp_path, str(H100_Q))
    r = CliRunner().invoke(
        main,
        [
            "cbd",
            "--config",
            cfg,
            "--node",
            "gpu001",
            "--check",
            "gpu_count",
            "--check",
            "row_remap",
        ],
    )
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split()[:2] == ["pass", "gpu_count"]
    assert "would drain: nothing" in lines[-1]
