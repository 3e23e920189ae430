"""Step 1 (masking, templates, timestamps) and the log layouts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from aegis_slurm.errors import InputError, NoDataError
from aegis_slurm.logs import parse
from aegis_slurm.logs.sources import Layout, read_logs


def _annotate(lines: list[str]) -> pl.DataFrame:
    shapes = [x.translate(str.maketrans("123456789", "000000000")) for x in lines]
    frame = pl.DataFrame({"node": ["n1"] * len(lines), "text": lines, "shape": shapes})
    return parse.annotate(frame)


def test_masking_folds_variables_into_one_shape() -> None:
    # two real NCCL lines (NVIDIA/nccl#1405) that differ only in ids, addresses and numbers
    a = (
        "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from "
        "peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)"
    )
    b = a.replace("10.216.210.236<54862>", "10.1.2.3<49892>").replace("3468:3905", "77:88")
    df = _annotate([a, b, "[2024-05-01 12:00:01] saved to /scratch/run7/ckpt/iter_0000100.pt"])
    assert df["masked"][0] == df["masked"][1]
    assert "<IP>" in df["masked"][0] and "10.216" not in df["masked"][0]
    assert df["masked"][2] == "[<TS>] saved to <PATH>"


def test_timestamps_iso_and_glog_share_one_clock() -> None:
    df = _annotate(
        [
            "[2024-05-01 00:00:10] iteration 3/ 100 | lm loss: 2.5",
            "no time on this line",
            "[rank3]:[E0501 00:00:20.408271257 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog ...",
        ]
    )
    ts = df["ts"].to_list()
    assert ts[1] == ts[0]  # forward-filled
    assert ts[2] - ts[0] == pytest.approx(10.408271, abs=1e-3)  # glog takes the ISO year
    assert df["iteration"].to_list() == [3, None, None]


def test_only_distinct_masked_lines_reach_the_miner() -> None:
    lines = [f"[2024-05-01 00:00:{i:02d}] iteration {i}/ 100 | lm loss: 2.{i}" for i in range(50)]
    df = _annotate([*lines, "RuntimeError: CUDA error: uncorrectable ECC error encountered"])
    distinct = df["masked"].unique(maintain_order=True).to_list()
    assert len(distinct) == 2
    t = parse.mine(distinct)
    assert len(set(t.ids.values())) == 2


def _write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_directory_of_node_files(tmp_path: Path) -> None:
    _write(tmp_path / "gpu001.log", "a\nb\n")
    _write(tmp_path / "gpu002.log", "[rank9]: c\n")
    files = list(read_logs([tmp_path]))
    assert [f.nodes for f in files] == [["gpu001"], ["gpu002"]]
    assert files[1].frame["text"].to_list() == [" c"]  # rank prefix stripped, node kept


def test_srun_label_file_maps_tasks_to_nodes(tmp_path: Path) -> None:
    f = _write(tmp_path / "slurm-4242.out", "0: hello\n3: boom\nsrun: error: x\n1: hi\n")
    lay = Layout(nodes=("n1", "n2"), tasks_per_node=2)
    (lf,) = read_logs([f], lay)
    rows = lf.frame.select("node", "line", "text").rows()
    assert rows[0] == ("n1", 1, "hello")
    assert rows[1] == ("n2", 2, "boom")  # task 3 with 2 tasks per node: the second node
    assert rows[2][0] == "slurm-4242(unlabelled)"
    assert rows[3] == ("n1", 4, "hi")


def test_rank_prefixes_with_ranks_per_node(tmp_path: Path) -> None:
    f = _write(tmp_path / "all.log", "[rank0]: a\n[rank12]:[default4]: b\n")
    (lf,) = read_logs([f], Layout(nodes=("n1", "n2"), ranks_per_node=8))
    assert lf.frame["node"].to_list() == ["n1", "n2"]
    assert lf.frame["text"].to_list() == [" a", " b"]


def test_per_task_files(tmp_path: Path) -> None:
    for t in range(4):
        _write(tmp_path / f"train_{t}.out", f"task {t}\n")
    files = list(read_logs([tmp_path], Layout(nodes=("a", "b"), tasks_per_node=2)))
    assert [f.nodes[0] for f in files] == ["a", "a", "b", "b"]


def test_bad_paths_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such log"):
        list(read_logs([tmp_path / "missing"]))
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoDataError):
        list(read_logs([tmp_path / "empty"]))


def test_missing_extra_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from aegis_slurm.errors import ConfigError

    monkeypatch.setitem(sys.modules, "drain3", None)  # as if the extra were not installed
    with pytest.raises(ConfigError, match=r"pip install 'aegis-slurm\[diagnosis\]'"):
        parse.new_miner()


def test_node_named_inside_the_file_name(tmp_path: Path) -> None:
    for n in ("gpu-a1", "gpu-a2"):
        _write(tmp_path / f"4242-{n}.log", "x\n")
    files = list(read_logs([tmp_path], Layout(nodes=("gpu-a1", "gpu-a2"))))
    assert [f.nodes for f in files] == [["gpu-a1"], ["gpu-a2"]]


def test_a_file_named_after_the_batch_host_holding_every_task_is_read_by_its_labels(tmp_path):
    # -o %j-%N.out -e %j-%N.err in a batch job: both files carry the batch host's name, the
    # .out holds every task's labelled lines; task 3 (on n2 with 2 tasks per node) failed
    (tmp_path / "4242-n1.out").write_text(
        "0: step 1 loss 2.1\n1: step 1 loss 2.1\n2: step 1 loss 2.1\n"
        "3: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    (tmp_path / "4242-n1.err").write_text("srun: error: n2: task 3: Exited with exit code 1\n")
    lay = Layout(nodes=("n1", "n2"), tasks_per_node=2)
    files = {f.path.suffix: f for f in read_logs([tmp_path], lay)}
    out = files[".out"].frame
    failing = out.filter(pl.col("text").str.contains("illegal memory access"))
    assert failing["node"].to_list() == ["n2"]
    assert sorted(files[".out"].nodes) == ["n1", "n2"]
    assert files[".err"].nodes == ["n1"]  # no labels: still the file's own node


def test_labels_beyond_the_node_count_follow_block_distribution(tmp_path):
    # 16 tasks on 2 nodes, tasks per node not given: task 12 runs on the second node (srun's
    # block distribution), not on "task12" or on node 12 % 2
    lines = [f"{t}: iteration 10 ok" for t in range(16)]
    lines.append("12: NCCL error: unhandled system error")
    f = tmp_path / "slurm-77.out"
    f.write_text("\n".join(lines) + "\n")
    (lf,) = read_logs([f], Layout(nodes=("gpu01", "gpu02")))
    bad = lf.frame.filter(pl.col("text").str.contains("NCCL error"))
    assert bad["node"].to_list() == ["gpu02"]
    assert sorted(lf.nodes) == ["gpu01", "gpu02"]


def test_glog_month_is_unpadded_as_pytorch_prints_it() -> None:
    """c10 prints ``month * 100 + day``: ``E321`` is March 21, ``E1119`` November 19.  Lines from
    tests/fixtures/logs/real (LlamaFactory#7396, pytorch-lightning#20434), with one ISO line for
    the year.  Before the fix ``E321`` was read as no time at all and masked as a hex id."""
    df = _annotate(
        [
            "[2025-03-21 02:00:00] start",
            "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] "
            "Watchdog caught collective operation timeout",
            "[rank3]:[E1119 13:21:12.512781555 ProcessGroupNCCL.cpp:616] [Rank 3] "
            "Watchdog caught collective operation timeout",
            "[80747] [rank4]:[F321 02:07:09.414640780 ProcessGroupNCCL.cpp:607] [Rank 4] "
            "Watchdog caught collective operation timeout",
        ]
    )
    ts = df["ts"].to_list()
    assert ts[1] - ts[0] == pytest.approx(428.408271, abs=1e-3)
    nov19 = datetime(2025, 11, 19, 13, 21, 12, 512781, tzinfo=UTC).timestamp()
    assert ts[2] == pytest.approx(nov19, abs=1e-3)
    assert "<HEX>" not in df["masked"][1] and "<HEX>" not in df["masked"][3]
    assert df["masked"][1].startswith("[<N>] [rank<N>]:[<TS> ")
