"""The runner: parallel probes, timeouts -> probe_error, internal bugs flagged, XID state,
fake sysfs/proc trees, expectations per node type."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from aegis_slurm.node import cbd, config, probes
from aegis_slurm.node.prolog import actions_for

from ._fixtures import FIX, H100_Q, fixture_text, materialize_sysfs


def by_check(verdicts):
    return {v.check: v for v in verdicts}


def test_healthy_gpu_node_from_recorded_outputs(cfg, tmp_path):
    cfg["expect"].update(
        gpus=8, nvlink_links=12, ib_ports=8, ib_rate_gbps=200, driver_version="535.161.08"
    )
    root = materialize_sysfs(FIX / "gcm" / "learn_ib_intf_operstate_down.json", tmp_path / "r")
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "meminfo").write_text("MemTotal:       2113612 kB\n")
    ov = {
        "nvidia_smi_q": lambda c: H100_Q.read_text(),
        "nvlink_status": lambda c: fixture_text("gpud/nvidia-smi.nvlink.status.a100"),
        "kernel_log": lambda c: fixture_text("gpud/dmesg.decode.iso.log"),
    }
    v = by_check(cbd.run(cfg, "gpu001", overrides=ov, root=root))
    for name in (
        "gpu_count",
        "driver_version",
        "ecc_uncorrectable",
        "row_remap",
        "pcie_link",
        "gpu_processes",
        "nvlink",
        "xid",
        "ib_ports",
        "memory",
    ):
        assert v[name].state == "pass", v[name]
    assert v["clocks_thermal"].state == "warn"  # recorded HW power-brake slowdown
    assert not actions_for(list(v.values()), cfg)["drain"]


def test_gcm_sysfs_tree_nic_operstate_down(cfg, tmp_path):
    root = materialize_sysfs(FIX / "gcm" / "learn_ib_intf_operstate_down.json", tmp_path / "r")
    cfg["expect"].update(nics=[f"ib{i}" for i in range(8)], ib_ports=8, ib_rate_gbps=200)
    v = by_check(cbd.run(cfg, "n1", root=root, only=["nics", "ib_ports"]))
    assert (v["nics"].state, v["nics"].evidence) == ("fail", "ib4 down")
    assert v["ib_ports"].state == "pass"


def _ib_port(root: Path, link_downed: int) -> None:
    port = root / "sys/class/infiniband/mlx5_0/ports/1"
    (port / "counters").mkdir(parents=True, exist_ok=True)
    for name, text in {
        "state": "4: ACTIVE",
        "phys_state": "5: LinkUp",
        "rate": "400 Gb/sec (4X NDR)",
        "link_layer": "InfiniBand",
    }.items():
        (port / name).write_text(text + "\n")
    (port / "counters" / "link_downed").write_text(f"{link_downed}\n")
    (port / "counters" / "symbol_error").write_text("7\n")


def test_ib_counter_deltas_across_runs(cfg, tmp_path):
    root, state = tmp_path / "r", {}
    _ib_port(root, 0)
    first = by_check(cbd.run(cfg, "n1", root=root, state=state, only=["ib_counters"]))
    assert first["ib_counters"].state == "skip"  # first reading: nothing to compare
    _ib_port(root, 3)
    second = by_check(cbd.run(cfg, "n1", root=root, state=state, only=["ib_counters"]))
    assert (second["ib_counters"].state, second["ib_counters"].evidence) == (
        "warn",
        "mlx5_0/1 link_downed+3",
    )
    third = by_check(cbd.run(cfg, "n1", root=root, state=state, only=["ib_counters"]))
    assert third["ib_counters"].state == "pass"


def test_xid_only_new_lines_count(cfg):
    log = fixture_text("gpud/dmesg-with-xid-119.log")
    state: dict = {}

    def run(text):
        return by_check(
            cbd.run(cfg, "n1", state=state, only=["xid"], overrides={"kernel_log": lambda c: text})
        )["xid"]

    assert run(log).state == "fail"
    assert run(log).state == "pass"  # same ring buffer again: already reported
    extra = (
        log + "[Sun Feb 23 16:30:00 2025] NVRM: Xid (PCI:0000:1b:00): 79, pid=0, "
        "GPU has fallen off the bus.\n"
    )
    v = run(extra)
    assert v.state == "fail" and "Xid 79 on 0000:1b:00" in v.evidence
    state["boot_id"] = "previous-boot"  # after a reboot the seen-set is reset
    assert run(extra).state == "fail"


def test_hung_python_probe_is_probe_error(cfg):
    cfg["runtime"]["probe_timeout_s"] = 0.2
    release = threading.Event()
    try:
        v = by_check(
            cbd.run(
                cfg,
                "n1",
                only=["gpu_count", "memory"],
                overrides={"nvidia_smi_q": lambda c: release.wait(60) and ""},
            )
        )
    finally:
        release.set()
    assert v["gpu_count"].state == "probe_error" and "hung" in v["gpu_count"].evidence
    assert v["memory"].state == "pass"  # other probes are unaffected
    cfg["expect"]["gpus"] = 8
    assert [x.check for x in actions_for([v["gpu_count"]], cfg)["drain"]] == ["gpu_count"]


def _alive(marker: str) -> bool:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                    return True
            except OSError:
                continue
    return False


def test_hung_command_probe_is_killed_and_probe_error(cfg):
    cfg["runtime"]["probe_timeout_s"] = 0.3
    cfg["probes"] = {"nvidia_smi_q": ["sleep", "31.4159"]}
    v = by_check(cbd.run(cfg, "n1", only=["gpu_count", "ecc_uncorrectable"]))
    assert v["gpu_count"].state == v["ecc_uncorrectable"].state == "probe_error"
    assert "timed out" in v["gpu_count"].evidence
    assert not _alive("31.4159") and not probes.LIVE_PGIDS


def test_failing_tool_and_garbage_output_are_probe_errors(cfg):
    cfg["probes"] = {"nvidia_smi_q": ["false"]}
    v = by_check(cbd.run(cfg, "n1", only=["gpu_count"]))["gpu_count"]
    assert v.state == "probe_error" and "exit 1" in v.evidence and not v.internal
    cfg["probes"] = {
        "nvidia_smi_q": [
            "echo",
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        ]
    }
    v = by_check(cbd.run(cfg, "n1", only=["gpu_count"]))["gpu_count"]
    assert v.state == "probe_error" and "unparseable" in v.evidence and not v.internal


def test_ibpanic_partial_output_with_exit_255_is_probe_error(cfg):
    path = FIX / "gpud" / "ibstat.39.0.a100.failed.ibpanic.exit-255.0"
    cfg["probes"] = {
        "ib": [
            "python3",
            "-c",
            "import sys; sys.stdout.write(open(sys.argv[1]).read()); sys.exit(255)",
            str(path),
        ]
    }
    cfg["expect"].update(ib_ports=8)
    v = by_check(cbd.run(cfg, "n1", only=["ib_ports"]))["ib_ports"]
    assert v.state == "probe_error" and "exit 255" in v.evidence


def test_internal_bugs_are_flagged_and_never_drain(cfg, monkeypatch):
    def boom(ctx):
        raise KeyError("bug")

    cfg["expect"]["gpus"] = 8
    v = by_check(cbd.run(cfg, "n1", only=["gpu_count"], overrides={"nvidia_smi_q": boom}))
    assert v["gpu_count"].state == "probe_error" and v["gpu_count"].internal
    assert not actions_for(list(v.values()), cfg)["drain"]  # policy says drain; bug doesn't

    def bad_check(data, exp):
        raise ZeroDivisionError

    spec = next(s for s in cbd.SPECS if s.name == "memory")
    monkeypatch.setattr(cbd, "SPECS", [cbd.Spec("memory", "meminfo", spec.parse, bad_check)])
    v = by_check(cbd.run(cfg, "n1"))["memory"]
    assert v.state == "probe_error" and v.internal and "check bug" in v.evidence


def test_mounts_present_and_responsive(cfg, tmp_path):
    data = tmp_path / "datasets"
    data.mkdir()
    root = tmp_path / "r"
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/mounts").write_text(
        f"server:/export {data} nfs4 rw,relatime 0 0\nproc /proc proc rw 0 0\n"
    )
    cfg["runtime"]["probe_timeout_s"] = 0.5
    cfg["expect"].update(mounts=[str(data), "/checkpoints"])
    v = by_check(cbd.run(cfg, "n1", root=root, only=["mounts"]))["mounts"]
    assert (v.state, v.evidence) == ("fail", "/checkpoints not mounted")
    cfg["expect"].update(mounts=[str(data)])
    assert by_check(cbd.run(cfg, "n1", root=root, only=["mounts"]))["mounts"].state == "pass"
    # a read that blocks forever (a FIFO nobody writes: same as a hung NFS read)
    os.mkfifo(data / ".aegis-canary")
    cfg["expect"]["mount_read_file"] = ".aegis-canary"
    v = by_check(cbd.run(cfg, "n1", root=root, only=["mounts"]))["mounts"]
    assert v.state == "fail" and "unresponsive" in v.evidence and "timed out" in v.evidence


def test_disk_space_real_statfs(cfg, tmp_path):
    cfg["expect"].update(disk_paths=[str(tmp_path)], disk_min_free_pct=0)
    v = by_check(cbd.run(cfg, "n1", only=["disk_space"]))["disk_space"]
    assert v.state == "pass" and str(tmp_path) in v.evidence
    cfg["expect"].update(disk_min_free_pct=100.1)
    assert by_check(cbd.run(cfg, "n1", only=["disk_space"]))["disk_space"].state == "fail"


def test_expectations_from_slurm_conf_and_nodetypes(cfg, tmp_path, monkeypatch):
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "NodeName=node[1-8] CPUs=8 Gres=gpu:h100:8 State=UNKNOWN\nNodeName=cpu[01-02] CPUs=64\n"
    )
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert cbd.resolve_expectations(cfg, "node3")["gpus"] == 8
    assert cbd.resolve_expectations(cfg, "cpu02")["gpus"] is None
    cfg["nodetype"] = [
        {"match": ["/^cpu\\d+$/"], "gpus": 0, "mem_gib": 256},
        {"match": ["node[1-4]"], "nvlink_links": 18},
    ]
    assert cbd.resolve_expectations(cfg, "cpu01")["gpus"] == 0
    assert cbd.resolve_expectations(cfg, "node4")["nvlink_links"] == 18
    assert cbd.resolve_expectations(cfg, "node5")["nvlink_links"] == 0
    assert config.expand_hostlist("gpu[001-003,010],x") == [
        "gpu001",
        "gpu002",
        "gpu003",
        "gpu010",
        "x",
    ]


def test_full_profile_tools_absent_are_unavailable_not_pass(cfg):
    cfg["probes"] = {
        "dcgm_diag": ["aegis-no-such-dcgmi"],
        "gpu_burn": ["aegis-no-gpu-burn"],
        "nccl_allreduce": ["aegis-no-nccl"],
    }
    v = by_check(
        cbd.run(cfg, "n1", "full", only=["dcgm_diag", "gpu_burn", "nccl_allreduce", "data_read"])
    )
    assert {x.state for x in v.values()} == {"skip"}
    assert all(x.evidence.startswith("unavailable") for x in v.values())


def test_full_profile_parses_recorded_tool_output(cfg, tmp_path):
    cfg["probes"] = {
        "nccl_allreduce": ["cat", str(FIX / "superbenchmark" / "nccl_allreduce.log")],
        "gpu_burn": ["cat", str(FIX / "superbenchmark" / "gpu_burn.log")],
    }
    blob = tmp_path / "ckpt.bin"
    blob.write_bytes(os.urandom(4 << 20))
    cfg["expect"].update(nccl_min_busbw_gbps=200, data_read_path=str(blob), data_read_mbytes=4)
    v = by_check(cbd.run(cfg, "n1", "full", only=["nccl_allreduce", "gpu_burn", "data_read"]))
    assert v["nccl_allreduce"].state == v["gpu_burn"].state == v["data_read"].state == "pass"
    assert v["data_read"].evidence.startswith("read 4 MB")


def test_unconfigured_node_never_drains(cfg):
    # this very machine: no GPU, no IB, nothing configured
    verdicts = cbd.run(cfg, "unconfigured-host")
    assert not actions_for(verdicts, cfg)["drain"], verdicts


def test_kmsg_records_through_the_real_kmsg_reader(cfg, tmp_path):
    # /dev/kmsg record format ("prio,seq,usec,flags;message"), read by the same non-blocking reader
    root = tmp_path / "r"
    (root / "dev").mkdir(parents=True)
    (root / "dev" / "kmsg").write_text(
        "6,3964,206764307,-;nvidia-nvlink: Nvlink Core is being initialized\n"
        "4,3990,306764307,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=, GPU has fallen off "
        "the bus.\n"
    )
    v = by_check(cbd.run(cfg, "n1", root=root, only=["xid"]))["xid"]
    assert v.state == "fail" and "Xid 79 on 0000:3b:00" in v.evidence


def test_services_and_time_sync_read_this_machine(cfg):
    import subprocess

    child = subprocess.Popen(["sleep", "30.271"])
    try:
        cfg["expect"]["services"] = ["sleep"]
        assert by_check(cbd.run(cfg, "n1", only=["services"]))["services"].state == "pass"
        cfg["expect"]["services"] = ["sleep", "aegis-no-such-daemon"]
        v = by_check(cbd.run(cfg, "n1", only=["services"]))["services"]
        assert (v.state, v.evidence) == ("fail", "not running: aegis-no-such-daemon")
    finally:
        child.kill()
        child.wait()
    tx = probes.adjtimex(probes.ProbeContext(exp={}))
    assert 0 <= tx["state"] <= 5 and tx["maxerror_us"] >= 0
    v = by_check(cbd.run(cfg, "n1", only=["time_sync"]))["time_sync"]
    assert v.state in ("pass", "warn")  # this VM's clock may or may not be NTP-synced


def _pci_tree(root: Path, manifest: dict, overrides: dict[str, tuple[str, str] | None]) -> None:
    """Fake /sys/bus/pci/devices with each manifest device at its expected link."""
    for bdf, want in manifest["pci"].items():
        speed, width = overrides.get(bdf, (want["link_speed"][-1], want["link_width"])) or (
            None,
            None,
        )
        if speed is None:
            continue
        dev = root / "sys/bus/pci/devices" / bdf
        dev.mkdir(parents=True, exist_ok=True)
        (dev / "current_link_speed").write_text(speed + "\n")
        (dev / "current_link_width").write_text(width + "\n")


def test_pci_links_against_recorded_gcm_manifest(cfg, tmp_path):
    import json

    path = FIX / "gcm" / "DGX_A100.json"
    manifest = json.loads(path.read_text())
    cfg["expect"]["pci_manifest"] = str(path)
    _pci_tree(tmp_path / "ok", manifest, {})
    v = by_check(cbd.run(cfg, "dgx1", root=tmp_path / "ok", only=["pci_links"]))["pci_links"]
    assert v.state == "pass" and v.evidence.startswith(f"{len(manifest['pci'])} PCIe devices")
    # an NVSwitch (topology_critical) trained at x1 and gen1, and one device gone
    nvsw = next(b for b, d in manifest["pci"].items() if d["dev"].startswith("nvswitch"))
    gone = next(b for b in manifest["pci"] if b != nvsw)
    _pci_tree(tmp_path / "bad", manifest, {nvsw: ("2.5 GT/s PCIe", "1"), gone: None})
    v = by_check(cbd.run(cfg, "dgx1", root=tmp_path / "bad", only=["pci_links"]))["pci_links"]
    assert v.state == "fail"
    assert f"{manifest['pci'][nvsw]['dev']} x1 < x2" in v.evidence
    assert f"({gone}) missing" in v.evidence


def test_disk_space_missing_path_fails_through_the_child(cfg, tmp_path):
    # a configured path that does not exist is a failure, not a silent skip
    gone = tmp_path / "scratch-not-mounted"
    cfg["expect"].update(disk_paths=[str(tmp_path), str(gone)], disk_min_free_pct=0)
    v = by_check(cbd.run(cfg, "n1", only=["disk_space"]))["disk_space"]
    assert v.state == "fail" and f"{gone}: does not exist" in v.evidence
    cfg["expect"].update(disk_paths=[str(gone)])
    assert by_check(cbd.run(cfg, "n1", only=["disk_space"]))["disk_space"].state == "fail"


def test_abandoned_probe_cannot_write_a_verdict_after_the_deadline(cfg, monkeypatch):
    # nvidia-smi hangs past its timeout and is abandoned; it answers (healthy) while the runner
    # is still turning results into verdicts: the late answer must not become a pass
    cfg["runtime"]["probe_timeout_s"] = 0.2
    cfg["expect"]["gpus"] = 8
    release = threading.Event()

    def hung(ctx):
        release.wait(60)
        return H100_Q.read_text()

    def parse_meminfo_then_let_the_hung_probe_finish(raw, st):
        release.set()
        probe = next(t for t in threading.enumerate() if t.name == "probe-nvidia_smi_q")
        probe.join(30)
        assert not probe.is_alive()
        return cbd.parse.parse_meminfo(raw)

    mem = next(s for s in cbd.SPECS if s.name == "memory")
    gpu = next(s for s in cbd.SPECS if s.name == "gpu_count")
    monkeypatch.setattr(
        cbd,
        "SPECS",
        [
            cbd.Spec("memory", "meminfo", parse_meminfo_then_let_the_hung_probe_finish, mem.check),
            gpu,
        ],
    )
    v = by_check(cbd.run(cfg, "n1", overrides={"nvidia_smi_q": hung}))
    assert v["gpu_count"].state == "probe_error" and "hung" in v["gpu_count"].evidence


def _started(child, name: str) -> None:
    """Wait until ``child`` has exec'd ``name`` (its comm shows it)."""
    comm = Path(f"/proc/{child.pid}/comm")
    for _ in range(1000):
        if comm.read_text().strip() == name:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{name} did not start: {comm.read_text()!r}")


def test_services_counts_only_root_processes(cfg, tmp_path):
    # a real process named like the daemon, but owned by an unprivileged user
    import subprocess
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="aegis-svc-", dir="/tmp"))
    name = "aegis-fakesvc"  # <= 15 chars: the whole name fits in comm
    try:
        d.chmod(0o755)
        fake = d / name
        fake.symlink_to("/bin/sleep")
        cfg["expect"]["services"] = [name]
        child = subprocess.Popen([str(fake), "30.577"], user="nobody")
        try:
            _started(child, name)
            v = by_check(cbd.run(cfg, "n1", only=["services"]))["services"]
            assert (v.state, v.evidence) == ("fail", f"not running: {name}")
        finally:
            child.kill()
            child.wait()
        child = subprocess.Popen([str(fake), "30.578"])  # the same, as root (we run as root)
        try:
            _started(child, name)
            v = by_check(cbd.run(cfg, "n1", only=["services"]))["services"]
            assert v.state == "pass", (v, Path(f"/proc/{child.pid}/status").read_text()[:300])
        finally:
            child.kill()
            child.wait()
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


def test_slurm_conf_default_applies_only_to_later_node_lines():
    conf = (
        "NodeName=cpu[01-02] CPUs=64\n"
        "NodeName=DEFAULT Gres=gpu:h100:8 CPUs=96\n"
        "NodeName=gpu[001-004]\n"
        "NodeName=gpu005 Gres=gpu:h100:4\n"
        "NodeName=DEFAULT Gres=gpu:a100:2\n"
        "NodeName=old[1-2]\n"
        "NodeName=DEFAULT CPUs=8\n"  # no Gres: the gpu default stays
        "NodeName=late1\n"
    )
    count = config.slurm_gpu_count
    assert count(conf, "cpu01") is None  # the DEFAULT below it does not apply
    assert count(conf, "gpu003") == 8
    assert count(conf, "gpu005") == 4
    assert count(conf, "old2") == 2
    assert count(conf, "late1") == 2
    assert count(conf, "elsewhere") is None


def test_state_files_private_and_not_followed(cfg, tmp_path):
    import contextlib
    import stat

    from aegis_slurm.node import files, prolog

    @contextlib.contextmanager
    def node_state(state_dir, host):
        with files.locked_json(state_dir / host / "state.json", prolog.SHAPE) as lk:
            yield lk.data

    state_dir = tmp_path / "state"
    host_dir = state_dir / "n1"
    host_dir.mkdir(parents=True)
    host_dir.chmod(0o755)  # e.g. created by an older version, or by hand
    with node_state(state_dir, "n1") as st:
        st["x"] = 1
    mode = lambda p: stat.S_IMODE(os.lstat(p).st_mode)  # noqa: E731
    assert mode(host_dir) == 0o700
    assert mode(host_dir / "state.json") == mode(host_dir / "state.lock") == 0o600
    # a planted symlink is never followed: not for the lock, not for the state file
    victim = tmp_path / "victim"
    (host_dir / "state.lock").unlink()
    (host_dir / "state.lock").symlink_to(victim)
    try:
        with node_state(state_dir, "n1"):
            raise AssertionError("opened a symlinked lock")
    except OSError:
        pass
    assert not victim.exists()
    (host_dir / "state.lock").unlink()
    victim.write_text('{"planted": true}')
    (host_dir / "state.json").unlink()
    (host_dir / "state.json").symlink_to(victim)
    with node_state(state_dir, "n1") as st:
        assert "planted" not in st
        st["y"] = 2
    assert victim.read_text() == '{"planted": true}'
    assert not (host_dir / "state.json").is_symlink()
    assert mode(host_dir / "state.json") == 0o600


def test_full_profile_runs_each_load_benchmark_alone(cfg, tmp_path):
    # gpu_burn beside nccl-tests or nvbandwidth reads healthy GPUs as slow (ratio and busbw
    # tests): the load groups must never overlap, but pcie_link_load must sample under gpu_burn.
    lock = threading.Lock()
    running: set[str] = set()
    overlaps: list[tuple[str, frozenset[str]]] = []
    burn_started = threading.Event()
    sampled_under_burn = threading.Event()

    def fake(name):
        def probe(ctx):
            with lock:
                if running:
                    overlaps.append((name, frozenset(running)))
                running.add(name)
            try:
                if name == "gpu_burn":
                    burn_started.set()
                    sampled_under_burn.wait(5)
                elif name == "nvidia_smi_q_load":
                    if burn_started.wait(5):
                        sampled_under_burn.set()
                else:
                    threading.Event().wait(0.05)  # long enough for a concurrent start to show
            finally:
                with lock:
                    running.discard(name)
            return "not a real output"

        return probe

    heavy = [name for group in cbd.LOAD_GROUPS for name in group]
    blob = tmp_path / "data.bin"
    blob.write_bytes(b"x" * 1024)
    cfg["expect"].update(data_read_path=str(blob), data_read_mbytes=1)
    cbd.run(cfg, "n1", "full", overrides={n: fake(n) for n in heavy})
    allowed = {frozenset({"gpu_burn"}), frozenset({"nvidia_smi_q_load"})}
    assert all(others in allowed for _name, others in overlaps), overlaps
    assert sampled_under_burn.is_set()


def test_full_profile_hung_benchmark_is_killed_before_the_next(cfg, monkeypatch):
    order: list[str] = []
    monkeypatch.setattr(probes, "kill_live_children", lambda: order.append("kill") or 0)
    cfg["runtime"]["full_probe_timeout_s"] = 0.2
    stop = threading.Event()
    ov = {
        "dcgm_diag": lambda c: stop.wait(30) and "",
        "gpu_burn": lambda c: order.append("gpu_burn") or "x",
        "nvidia_smi_q_load": lambda c: "x",
    }
    try:
        v = by_check(cbd.run(cfg, "n1", "full", overrides=ov, only=["dcgm_diag", "gpu_burn"]))
    finally:
        stop.set()
    assert v["dcgm_diag"].state == "probe_error" and "hung" in v["dcgm_diag"].evidence
    assert order[:2] == ["kill", "gpu_burn"], order  # killed before the next benchmark starts
    assert v["gpu_burn"].state == "probe_error"  # ran (unparseable "x"), not abandoned
    assert "unparseable" in v["gpu_burn"].evidence


def test_commands_see_slurm_conf_and_tz_and_nothing_else_of_our_environment(monkeypatch):
    """A site whose slurm.conf is not at the default path sets SLURM_CONF: sacct/squeue run by
    ``minder --job``/``watch`` must talk to that cluster; the rest of the caller's environment
    (a user's LD_PRELOAD, a locale) never reaches a probe."""
    monkeypatch.setenv("SLURM_CONF", "/srv/site/etc/slurm.conf")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("TZ", "Asia/Shanghai")  # sacct prints local times: parsed in our TZ
    seen = dict(line.split("=", 1) for line in probes.run_argv(["env"], 5).splitlines())
    assert seen["SLURM_CONF"] == "/srv/site/etc/slurm.conf" and seen["TZ"] == "Asia/Shanghai"
    assert seen["LC_ALL"] == "C"
    assert "LD_PRELOAD" not in seen and "LANG" not in seen
    monkeypatch.delenv("SLURM_CONF")
    assert "SLURM_CONF" not in probes.run_argv(["env"], 5)
