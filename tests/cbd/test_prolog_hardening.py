"""Issue 10 regressions on the Prolog/HealthCheck side, through the real ``prolog/aegis-prolog``
wrapper; a fake scontrol records what Slurm would have been asked to do."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from ._fake_slurm import FakeSlurm
from ._fixtures import H100_Q, drop_gpu

REPO = Path(__file__).resolve().parents[2]
WRAPPER = REPO / "prolog" / "aegis-prolog"
NODES = [f"node{i}" for i in range(1, 11)]


def site(tmp: Path, *, smi: Path = H100_Q, kmsg: Path | None = None, extra: str = "") -> Path:
    if kmsg is None:
        kmsg = tmp / "kmsg"
        kmsg.touch()
    conf = tmp / "cbd.toml"
    conf.write_text(
        f"""[runtime]
state_dir = "{tmp}/state"
textfile_dir = ""
syslog = false
[expect]
gpus = 8
time_sync = "off"
[probes]
nvidia_smi_q = ["cat", "{smi}"]
kernel_log = ["cat", "{kmsg}"]
{extra}
"""
    )
    return conf


def run(
    conf: Path, fake: FakeSlurm, node: str = "node5", **env: str
) -> subprocess.CompletedProcess:
    e = {
        "PATH": fake.path,
        "AEGIS_CBD_CONFIG": str(conf),
        "AEGIS_PYTHON": str(REPO / ".venv" / "bin" / "python3"),
        "SLURMD_NODENAME": node,
        "SLURM_JOB_ID": "42",
        "SLURM_SCRIPT_CONTEXT": "prolog_slurmd",
        "SLURM_CONF": str(conf.parent / "no-slurm.conf"),
        **env,
    }
    return subprocess.run(
        ["/bin/sh", str(WRAPPER)], env=e, capture_output=True, text=True, timeout=120, check=False
    )


def state(conf: Path, node: str = "node5") -> dict:
    return json.loads((conf.parent / "state" / node / "state.json").read_text())


@pytest.mark.parametrize(
    ("typo", "why"),
    [
        ('[expect]\ngpus = "eight"', "expect.gpus must be an integer or one of 'slurm'"),
        ('[expect]\nservices = "systemd"', "expect.services must be a list of strings"),
        ('[expect]\ndisk_paths = "/tmp"', "expect.disk_paths must be a list of strings"),
        ('[expect]\nmounts = "/home"', "expect.mounts must be a list of strings"),
        ('[expect]\nnics = "ib0"', "expect.nics must be a list of strings"),
        ("[runtime]\nwatchdog_s = 0", "runtime.watchdog_s must be > 0"),
        ("[runtime]\nwatchdog_s = -5", "runtime.watchdog_s must be > 0"),
        ("[runtime]\nprobe_timeout = 3", "unknown key runtime.probe_timeout"),
        ('[[nodetype]]\nmatch = ["node*"]\nservices = "sshd"', "nodetype[0].services must be"),
    ],
)
def test_10_6_config_typos_never_drain_and_say_why(tmp_path, typo, why):
    fake = FakeSlurm(tmp_path, NODES)
    conf = tmp_path / "cbd.toml"
    text = site(tmp_path).read_text()
    # the typo goes into its own table (TOML forbids repeating [expect] / [runtime])
    table, _, body = typo.partition("\n")
    key = body.split("\n")[-1].split(" =")[0]
    text = "".join(ln + "\n" for ln in text.splitlines() if not ln.startswith(key + " ="))
    if table in text:
        text = text.replace(table + "\n", typo + "\n", 1)
    else:
        text += typo + "\n"
    conf.write_text(text)
    r = run(conf, fake)
    assert r.returncode == 0, r.stderr
    assert "config error" in r.stderr and why in r.stderr, r.stderr
    assert fake.updates() == []  # nothing drained, nothing asked of slurmctld


def test_10_6_defaults_are_the_schema():
    """A key added to a default TOML is known with its type; the default files validate."""
    from aegis_slurm.node import config
    from aegis_slurm.node import typedtoml as tt

    sch = config.schema()
    assert sch.check(config.defaults(), "") == config.defaults()
    d = tt.merge(config.defaults(), {"expect": {"new_check_max": 3}})
    spec = tt.derive(d, "", {**config.DECLARED, "policy": tt.MapOf(tt.Scalar(str))})
    assert spec.check({"expect": {"new_check_max": 4}}, "") == {"expect": {"new_check_max": 4}}
    with pytest.raises(config.ConfigError, match=r"expect\.new_check_max must be an integer"):
        spec.check({"expect": {"new_check_max": "4"}}, "")


def test_10_8_hung_config_read_is_bounded_by_the_watchdog(tmp_path):
    fake = FakeSlurm(tmp_path, NODES)
    fifo = tmp_path / "cbd.toml"
    os.mkfifo(fifo)  # open() blocks like a hung NFS mount
    t0 = time.monotonic()
    r = run(fifo, fake)
    took = time.monotonic() - t0
    assert r.returncode == 0 and "watchdog fired" in r.stderr, r.stderr
    # the packaged defaults: watchdog_s + watchdog_grace_s
    from aegis_slurm.node import config

    rt = config.defaults()["runtime"]
    assert took < rt["watchdog_s"] + rt["watchdog_grace_s"] + 10
    assert fake.updates() == []


def test_10_9_a_drain_always_comes_with_the_requeue_exit(tmp_path):
    fake = FakeSlurm(tmp_path, NODES)
    smi = tmp_path / "smi7"
    smi.write_text(drop_gpu(H100_Q.read_text(), 3))
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    conf = site(tmp_path, smi=smi)
    conf.write_text(
        conf.read_text().replace('textfile_dir = ""', f'textfile_dir = "{blocker}/prom"')
    )
    r = run(conf, fake)
    assert fake.drains() == ["node5"]
    assert r.returncode == 1, r.stderr  # Slurm requeues the job off the node just drained
    assert "cannot write the metrics file" in r.stderr


def test_10_10_node_name_is_untrusted_in_paths(tmp_path):
    fake = FakeSlurm(tmp_path, NODES)
    conf = site(tmp_path)
    r = run(conf, fake, node="../../x")
    assert r.returncode == 0 and "refusing node name '../../x'" in r.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path.parent / "x").exists()
    assert not list(tmp_path.rglob("state.json"))


@pytest.mark.parametrize(
    "content", ['{"passes": []}', '{"counters": {"runs": "many"}}', "[]", "{not json"]
)
def test_10_7_a_state_file_of_the_wrong_shape_is_repaired_not_fatal(tmp_path, content):
    fake = FakeSlurm(tmp_path, NODES)
    conf = site(tmp_path)
    d = tmp_path / "state" / "node5"
    d.mkdir(parents=True)
    (d / "state.json").write_text(content)
    for _ in range(2):
        r = run(conf, fake)
        assert r.returncode == 0, r.stderr
    st = state(conf)
    assert st["last"]["rc"] == 0 and st["counters"]["runs"] == 2
    assert st["counters"]["state_repaired"] == 1
    assert isinstance(st["passes"], dict) and st["passes"]["gpu_count"] == 2
    if not content.startswith('{"'):
        assert (d / "state.json.corrupt").read_text() == content  # quarantined, not lost


def _kmsg(seq: int, msg: str) -> str:
    return f"4,{seq},{seq * 1000},-;{msg}\n"


def test_10_4_a_handled_xid_never_comes_back_after_many_harmless_ones(tmp_path):
    fake = FakeSlurm(tmp_path, NODES)
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(
        _kmsg(100, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.")
    )
    conf = site(tmp_path, kmsg=kmsg)
    r = run(conf, fake, AEGIS_MODE="healthcheck")
    assert r.returncode == 0 and fake.drains() == ["node5"]
    assert fake.nodes()["node5"]["reason"].startswith("aegis: xid:")
    fake.set_node("node5", state="IDLE", reason="", time="")  # the admin fixed it, resumed
    harmless = "".join(
        _kmsg(101 + i, f"NVRM: Xid (PCI:0000:3b:00): 31, pid={i}, Ch 00000010, MMU Fault")
        for i in range(6000)
    )
    with kmsg.open("a") as f:
        f.write(harmless)
    for _ in range(2):
        assert run(conf, fake, AEGIS_MODE="healthcheck").returncode == 0
    assert fake.drains() == ["node5"]  # only the first drain
    xid = next(v for v in state(conf)["last"]["verdicts"] if v["check"] == "xid")
    assert xid["state"] != "fail"
    # a new critical XID still drains
    with kmsg.open("a") as f:
        f.write(_kmsg(9000, "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE (double bit error)"))
    run(conf, fake, AEGIS_MODE="healthcheck")
    assert fake.drains() == ["node5", "node5"]


def test_10_17_storm_guard_trip_is_visible_on_the_node_and_in_the_hook_log(tmp_path):
    fake = FakeSlurm(tmp_path, NODES)
    for n in ("node1", "node2"):  # 2 of 10 already drained for gpu_count: a third is > 20%
        fake.set_node(
            n, state="IDLE+DRAIN", reason="aegis: gpu_count: 7 GPUs", time="2026-01-01T00:00:00"
        )
    smi = tmp_path / "smi7"
    smi.write_text(drop_gpu(H100_Q.read_text(), 3))
    conf = site(tmp_path, smi=smi)
    r = run(conf, fake)
    assert r.returncode == 0 and fake.drains() == []
    assert "drain-storm guard: NOT draining" in r.stderr
    comment = fake.nodes()["node5"]["comment"]
    assert comment.startswith("aegis: drain-storm guard") and "gpu_count" in comment
    # an admin's node comment is never overwritten
    fake.set_node("node5", comment="RMA ticket 77")
    run(conf, fake)
    assert fake.nodes()["node5"]["comment"] == "RMA ticket 77"


def test_10_19_second_look_undrains_a_simultaneous_overshoot(tmp_path):
    """Two nodes drained at the same instant pass the guard separately; the one ranked last
    undoes its own drain and says so on the node."""
    fake = FakeSlurm(tmp_path, NODES, also_drain={"node5": ["node1"]})
    fake.set_node(
        "node2", state="IDLE+DRAIN", reason="aegis: gpu_count: x", time="2026-01-01T00:00:00"
    )
    smi = tmp_path / "smi7"
    smi.write_text(drop_gpu(H100_Q.read_text(), 3))
    r = run(site(tmp_path, smi=smi), fake)
    assert r.returncode == 0, r.stderr  # undrained: the job may run, no requeue
    assert "undrained again" in r.stderr
    assert fake.nodes()["node5"]["state"] == "IDLE"
    assert "undrained again" in fake.nodes()["node5"]["comment"]
