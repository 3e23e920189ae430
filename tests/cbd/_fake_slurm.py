"""A fake ``scontrol``/``sacct``/``sacctmgr`` for the hook tests: records every argv and keeps
node states in a JSON file, as slurmctld would (what Slurm *does* is tested on the real
cluster in tests/slurm/).  Standard library only.

State file: ``{"nodes": {name: {"state": "IDLE", "reason": "", "time": iso, "comment": ""}},
"admin_comment": "...", "also_drain": {node: [other, ...]}}``; ``also_drain`` simulates another
hook draining other nodes at the same instant (the storm guard's second look).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCRIPT = r"""
import json, sys
from datetime import datetime
STATE = __STATE__
LOG = __LOG__
name = sys.argv[0].rsplit("/", 1)[-1]
args = sys.argv[1:]
with open(LOG, "a") as f:
    f.write(json.dumps([name, *args]) + "\n")
with open(STATE) as f:
    st = json.load(f)
def line(n, v):
    r = ""
    if v.get("reason"):
        r = f" Reason={v['reason']} [root@{v['time']}]"
    c = v.get("comment") or "(null)"
    return f"NodeName={n} Arch=x86_64 State={v['state']} Comment={c} Extra=(null){r}"
if name == "scontrol":
    if args[:1] == ["-o"]:
        args = args[1:] + ["-o"]
    if args[:2] in (["show", "nodes"], ["show", "node"]):
        want = [a for a in args[2:] if a != "-o"]
        for n, v in sorted(st["nodes"].items()):
            if not want or n in want:
                print(line(n, v))
    elif args[:2] == ["show", "job"]:
        print(st.get("job", ""))
    elif args[:1] == ["update"]:
        kv = dict(a.split("=", 1) for a in args[1:])
        n = kv.get("nodename")
        if n:
            v = st["nodes"][n]
            now = datetime.now().isoformat(timespec="seconds")
            if kv.get("state") == "drain":
                v.update(state="IDLE+DRAIN", reason=kv.get("reason", ""), time=now)
                for o in st.get("also_drain", {}).get(n, []):
                    st["nodes"][o].update(state="IDLE+DRAIN", reason=kv.get("reason", ""), time=now)
            elif kv.get("state") == "resume":
                v.update(state="IDLE", reason="", time="")
            if "comment" in kv:
                v["comment"] = kv["comment"]
elif name == "sacct":
    jid = args[args.index("-j") + 1]
    print(st.get("admin_comment", "") + "|" + jid)
elif name == "sacctmgr":
    for a in args:
        if a.startswith("AdminComment="):
            st["admin_comment"] = a.split("=", 1)[1]
with open(STATE, "w") as f:
    json.dump(st, f)
"""


class FakeSlurm:
    def __init__(self, root: Path, nodes: list[str], **extra: object) -> None:
        self.bin = root / "fakebin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.state = root / "fake-slurm.json"
        self.log = root / "fake-slurm.log"
        self.log.write_text("")
        st = {"nodes": {n: {"state": "IDLE", "reason": "", "time": ""} for n in nodes}, **extra}
        self.state.write_text(json.dumps(st))
        body = SCRIPT.replace("__STATE__", repr(str(self.state))).replace(
            "__LOG__", repr(str(self.log))
        )
        for tool in ("scontrol", "sacct", "sacctmgr"):
            p = self.bin / tool
            p.write_text(f"#!{sys.executable}\n{body}")
            p.chmod(0o755)

    @property
    def path(self) -> str:
        return f"{self.bin}:/usr/bin:/bin"

    def calls(self, tool: str | None = None) -> list[list[str]]:
        out = [json.loads(x) for x in self.log.read_text().splitlines()]
        return [c for c in out if tool is None or c[0] == tool]

    def updates(self) -> list[list[str]]:
        return [c for c in self.calls("scontrol") if c[1:2] == ["update"]]

    def drains(self) -> list[str]:
        return [c[2].split("=", 1)[1] for c in self.updates() if "state=drain" in c]

    def nodes(self) -> dict[str, dict[str, str]]:
        return json.loads(self.state.read_text())["nodes"]

    def set(self, **kw: object) -> None:
        st = json.loads(self.state.read_text())
        st.update(kw)
        self.state.write_text(json.dumps(st))

    def set_node(self, node: str, **kw: str) -> None:
        st = json.loads(self.state.read_text())
        st["nodes"][node].update(kw)
        self.state.write_text(json.dumps(st))
