"""NCCL all-reduce bisection (optional item of issue 11): the search, fed with recorded real
nccl-tests outputs (a 2x8 H100 run at 338.8 GB/s peak, an 8x A100 run at 235.3 GB/s)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from aegis_slurm.node import nccl_bisect
from aegis_slurm.node.parse import parse_nccl_tests

from ._fixtures import FIX, fixture_text

FAST = parse_nccl_tests(fixture_text("nccl-tests/ztan-NCCL-test-result")).max_busbw_gbps
SLOW = parse_nccl_tests(fixture_text("superbenchmark/nccl_allreduce.log")).max_busbw_gbps
NODES = [f"gpu{i:03d}" for i in range(1, 9)]


def fabric(bad_node: set[str] = frozenset(), bad_nic: set[str] = frozenset(), cut=None):
    """A measure: a bad node is slow in every group; a bad NIC only across nodes; ``cut``
    (two sets) is a broken link between them."""

    def measure(group: list[str]) -> float:
        g = set(group)
        if g & bad_node or (len(g) > 1 and g & bad_nic):
            return SLOW
        if cut and g & cut[0] and g & cut[1]:
            raise TimeoutError("srun timed out")
        return FAST

    return measure


def test_healthy_set_is_one_run():
    res = nccl_bisect.bisect(NODES, fabric(), 300)
    assert (res.bad, res.inconclusive, len(res.tests)) == ([], [], 1)
    assert res.tests[0]["busbw_gbps"] == 338.82


def test_slow_node_is_named():
    res = nccl_bisect.bisect(NODES, fabric(bad_node={"gpu006"}), 300)
    assert res.bad == ["gpu006"] and not res.inconclusive
    assert len(res.tests) < len(NODES) + 4  # a bisection, not one run per node


def test_bad_nic_is_named_by_pairing_with_a_proven_node():
    # alone the node is fine (NVLink only); with any other node it is slow
    res = nccl_bisect.bisect(NODES, fabric(bad_nic={"gpu003"}), 300)
    assert res.bad == ["gpu003"]


def test_fault_between_halves_blames_no_node():
    cut = ({"gpu001", "gpu002", "gpu003", "gpu004"}, {"gpu005", "gpu006", "gpu007", "gpu008"})
    res = nccl_bisect.bisect(NODES, fabric(cut=cut), 300)
    assert res.bad == [] and res.inconclusive == [NODES]
    assert res.tests[0]["error"] == "srun timed out"


def test_srun_argv_and_recorded_output(tmp_path: Path, monkeypatch):
    log = tmp_path / "argv"
    srun = tmp_path / "srun"
    srun.write_text(
        f'#!/bin/sh\necho "$@" > {log}\ncat {FIX / "nccl-tests/ztan-NCCL-test-result"}\n'
    )
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    bw = nccl_bisect.srun_measure(8, 30)(["gpu001", "gpu002"])
    assert bw == 338.82
    assert log.read_text().split()[:4] == [
        "--nodes=2",
        "--nodelist=gpu001,gpu002",
        "--ntasks-per-node=8",
        "--gpus-per-node=8",
    ]


def test_main_without_nodes(monkeypatch, capsys):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    assert nccl_bisect.main(["--min-busbw", "300"]) == 2
    assert "no --nodes" in capsys.readouterr().err


def test_main_end_to_end_with_fake_slurm_tools(tmp_path: Path, monkeypatch, capsys):
    (tmp_path / "scontrol").write_text("#!/bin/sh\necho gpu001 gpu002 gpu003 gpu004\n")
    slow = FIX / "superbenchmark/nccl_allreduce.log"
    fast = FIX / "nccl-tests/ztan-NCCL-test-result"
    # gpu003 is slow in every run that includes it
    (tmp_path / "srun").write_text(
        f'#!/bin/sh\ncase "$2" in *gpu003*) cat {slow};; *) cat {fast};; esac\n'
    )
    for f in ("scontrol", "srun"):
        (tmp_path / f).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    rc = nccl_bisect.main(["--nodes", "gpu[001-004]", "--min-busbw", "300"])
    out = json.loads(capsys.readouterr().out)
    assert (rc, out["bad"]) == (3, ["gpu003"])
