"""The defects the independent evaluation on real logs exposed, each on the real line(s) that
exposed it (sources in tests/fixtures/logs/real/README.md and the URLs below)."""

from __future__ import annotations

from pathlib import Path

from aegis_slurm.logs import Layout, diagnose_logs
from aegis_slurm.logs.diagnose import ALL_NODES
from aegis_slurm.logs.sources import read_file

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"


def _write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_torchrun_local_prefix_in_front_of_the_rank_prefix(tmp_path: Path) -> None:
    # https://github.com/pytorch/pytorch/issues/113128 (a 16-rank job, torchrun --tee): the
    # stacked ``[default0]:[rank12]:`` was stripped but the rank was never read, so the whole
    # file was one node
    f = _write(
        tmp_path / "all.log",
        "[default0]:[rank12]:[E817 17:40:34.227531918 ProcessGroupNCCL.cpp:1515] [PG 0 "
        "(default_pg) Rank 12] Process group watchdog thread terminated with exception: CUDA "
        "error: uncorrectable ECC error encountered\n"
        "[default0]:Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
    )
    lf = read_file(f, Layout(nodes=("n0", "n1"), ranks_per_node=8))
    assert lf.frame["node"].to_list() == ["n1", "all(unlabelled)"]
    assert lf.frame["text"][0].startswith("[E817 17:40:34")


def test_collector_timestamp_and_counter_in_front_of_the_rank_prefix() -> None:
    # NVIDIA/nccl#1610 (`` 2025-02-18 12:54 [rank13]:``) and LlamaFactory#7396
    # (``[80746] [rank0]:``): the rank is read, what the collector put in front stays
    lay = Layout(ranks_per_node=1)
    ts = read_file(REAL / "nccl1610-alltoall-timeout.log", lay).frame
    assert ts["node"].to_list()[:4] == ["node#13", "node#13", "node#15", "node#15"]
    assert ts["text"][0].startswith(" 2025-02-18 12:54 [E218 04:54:22")
    counter = read_file(REAL / "llamafactory7396-allreduce-timeout.log", lay).frame
    assert counter["node"].to_list() == ["node#0", "node#4", "node#0", "node#3"]
    assert counter["text"][1].startswith("[80747] [E321 02:07:08")


def test_a_message_mentioning_a_rank_is_not_a_prefix(tmp_path: Path) -> None:
    # the prefix may be preceded by at most 40 characters without a bracket: a long message
    # that happens to contain ``[rankN]:`` later is not re-attributed
    f = _write(
        tmp_path / "n.log",
        "RuntimeError: NCCL communicator was aborted on rank 2, see the earlier [rank2]: lines\n",
    )
    assert read_file(f, Layout(ranks_per_node=1)).frame["node"].to_list() == ["n"]


def test_nccl_host_prefix_attributes_lines_in_an_unlabelled_file() -> None:
    # NVIDIA/nccl#629: one stdout, two hosts, NCCL_DEBUG's ``host:pid:tid [dev]`` on every NCCL
    # line; before, the whole file was one node
    lf = read_file(REAL / "nccl629-illegal-memory-access.log", Layout())
    nodes = lf.frame["node"].to_list()
    assert nodes[0] == nodes[13] == "A03-R28-I49-2-6000166"
    assert nodes[5] == "A03-R28-I49-3-9000018"
    assert nodes[15] == "nccl629-illegal-memory-access(unlabelled)"  # "host: Test NCCL failure"
    # the host, pid and thread are cut off the text: both hosts' lines share templates
    assert lf.frame["text"][13] == (
        "init.cc:204 NCCL WARN Cuda failure 'an illegal memory access was encountered'"
    )


def test_nccl_hosts_do_not_mix_with_rank_units(tmp_path: Path) -> None:
    # Lightning-AI/pytorch-lightning#20434: ``[rank3]:`` lines and babel-0-31's NCCL lines in
    # one file; without the node list the NCCL lines stay unlabelled (rank units and host names
    # would mix), with it they go to the host
    text = (REAL / "lightning20434-broadcast-timeout.log").read_text()
    f = _write(tmp_path / "job.out", text)
    alone = read_file(f, Layout(ranks_per_node=1)).frame["node"].to_list()
    assert alone[4] == "node#3" and alone[0] == "job(unlabelled)"
    named = read_file(f, Layout(nodes=("babel-0-31",), ranks_per_node=4)).frame["node"]
    assert set(named.to_list()) == {"babel-0-31"}


def test_an_outlier_by_absence_is_not_a_culprit() -> None:
    # XPixelGroup/BasicSR#737: ranks 1 and 0 each print the watchdog line and the "Exception
    # detected" line, the excerpt ends after rank 2's watchdog line.  Rank 2 stood out only by
    # missing a line, was named the culprit with no line to show; the failure is everywhere.
    v = diagnose_logs([REAL / "basicsr737-allreduce-timeout.log"], layout=Layout(ranks_per_node=1))
    assert v.all_nodes and v.nodes[0]["node"] == ALL_NODES
    assert v.lines and "Watchdog caught collective operation timeout" in v.lines[0]["text"]


def test_all_nodes_shows_a_shared_event_the_representative_did_not_log() -> None:
    # hiyouga/LlamaFactory#8261: rank 0 logs "failure detected by watchdog", rank 2 the
    # "Watchdog caught collective operation timeout" line; the verdict showed lines from one
    # representative rank only and dropped the timeout although a slot was free
    v = diagnose_logs(
        [REAL / "llamafactory8261-allreduce-timeout.log"], layout=Layout(ranks_per_node=1)
    )
    assert v.all_nodes
    shown = {ln["line"] for ln in v.lines}
    assert {1, 4} <= shown  # rank 0's "failure detected", rank 2's watchdog timeout


def test_bracketed_iso_timestamp_in_front_of_the_rank_prefix() -> None:
    # sgl-project/sglang#3932 (held-out case; its culprit is unknown, so no score moves): a log
    # shipper's ``[2025-02-27T16:30:43.48675097Z] [rank3]:`` — the rank was not read, so the line
    # landed on the file instead of rank 3
    lf = read_file(REAL / "heldout" / "sglang3932-two-node-timeout.log", Layout(ranks_per_node=1))
    first = lf.frame.row(0, named=True)
    assert first["node"] == "node#3"
    assert first["text"].startswith("[2025-02-27T16:30:43.48675097Z] [E227 16:30:43")
