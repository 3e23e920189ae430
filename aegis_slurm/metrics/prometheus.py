"""Read a job's metrics from Prometheus' HTTP API (``/api/v1/query_range``).

One range query per metric, aggregated per node by the catalog's function over the label that names
the node (dcgm-exporter: ``Hostname``; node_exporter: ``instance``).  The mapping from a Slurm node
name to that label's value is a template per exporter (``{node}`` and ``{node}:9100`` by default).

``last_over_time(x[tolerance])`` keeps Prometheus from carrying a vanished series' last value
forward for its default 5-minute lookback: a node that stopped reporting must show as absent.
Down, slow or erroring Prometheus: a :class:`ServiceError` naming the URL and the cause, after
``retries`` attempts.  It is never read as "no outlier".
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from aegis_slurm.errors import ConfigError, ServiceError
from aegis_slurm.metrics.catalog import MetricSpec, is_name_pattern


@dataclass(frozen=True)
class PromConfig:
    url: str
    timeout: float = 10.0  # seconds per HTTP request
    retries: int = 2  # extra attempts after a connection error, timeout or 5xx
    backoff: float = 1.0  # seconds before the first retry, doubled after each
    dcgm_label: str = "Hostname"
    dcgm_value: str = "{node}"
    node_label: str = "instance"
    node_value: str = "{node}:9100"

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"Prometheus URL {self.url!r} must be http(s)://host[:port][/path]")
        for t in (self.dcgm_value, self.node_value):
            if "{node}" not in t:
                raise ConfigError(f"label template {t!r} must contain {{node}}")

    def label(self, spec: MetricSpec) -> tuple[str, str]:
        return (
            (self.dcgm_label, self.dcgm_value)
            if spec.source == "dcgm"
            else (self.node_label, self.node_value)
        )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib would follow a redirect of the POST as a GET without the query (Prometheus then
    answers "empty query"): name the redirect instead, so the admin configures the final URL."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise ServiceError(
            f"Prometheus at {req.full_url.split('/api/')[0]} redirects (HTTP {code}) to "
            f"{newurl.split('?')[0]}; configure that URL"
        )


_OPENER = urllib.request.build_opener(_NoRedirect)


def _get(cfg: PromConfig, path: str, params: dict[str, str]) -> dict:
    """POST a form to the API; retry transient failures; return the ``data`` object."""
    url = cfg.url.rstrip("/") + path
    body = urllib.parse.urlencode(params).encode()
    delay, last = cfg.backoff, ""
    for attempt in range(cfg.retries + 1):
        if attempt:
            time.sleep(delay)
            delay *= 2
        req = urllib.request.Request(url, data=body, method="POST")  # noqa: S310 (http(s) only)
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
        try:
            with _OPENER.open(req, timeout=cfg.timeout) as resp:
                doc = json.loads(_read_capped(resp, cfg))
        except urllib.error.HTTPError as e:
            detail = _api_error(e)
            if e.code < 500:  # a bad query does not get better by asking again
                raise ServiceError(f"Prometheus at {cfg.url} refused the query: {detail}") from e
            last = f"HTTP {e.code}: {detail}"
            continue
        except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as e:
            reason = getattr(e, "reason", e)
            last = (
                f"no answer within {cfg.timeout:g}s"
                if isinstance(reason, TimeoutError) or "timed out" in str(reason)
                else f"{reason}"
            )
            continue
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            last = f"answer is not JSON ({getattr(e, 'msg', None) or type(e).__name__})"
            continue
        if not isinstance(doc, dict) or doc.get("status") != "success":
            err = doc.get("error", doc) if isinstance(doc, dict) else doc
            raise ServiceError(f"Prometheus at {cfg.url} answered an error: {str(err)[:200]}")
        if doc.get("warnings"):  # a partial answer (a shard or remote store missing): the
            # absent nodes would look unreachable, so there is no verdict on it
            raise ServiceError(
                f"Prometheus at {cfg.url} answered partially ({str(doc['warnings'])[:200]}); "
                "no verdict (not a pass)"
            )
        data = doc.get("data")
        if not isinstance(data, dict):
            raise ServiceError(f"Prometheus at {cfg.url} answered without a data object")
        return data
    raise ServiceError(
        f"Prometheus at {cfg.url} is unavailable after {cfg.retries + 1} attempt(s): {last}; "
        "no verdict (not a pass)"
    )


#: Largest answer read (bytes): a 1,024-node job's 10 minutes of one metric is ~2 MB; far more
#: is a wrong query or a wrong server, and must not exhaust the admin host's memory.
MAX_ANSWER = 256 * 1024 * 1024


def _read_capped(resp, cfg: PromConfig) -> bytes:
    """The body, read in chunks under a total deadline (``timeout`` x 3) and :data:`MAX_ANSWER`.

    ``urlopen``'s timeout bounds each socket read only: a server dripping a byte every few
    seconds would otherwise hold a watch pass forever.
    """
    deadline = time.monotonic() + 3 * cfg.timeout
    chunks, size = [], 0
    while chunk := resp.read1(1 << 20):  # read1: one socket read, so the deadline is seen
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER:
            raise OSError(f"answer larger than {MAX_ANSWER >> 20} MiB")
        if time.monotonic() > deadline:
            raise TimeoutError("timed out")
    return b"".join(chunks)


def _api_error(e: urllib.error.HTTPError) -> str:
    try:
        doc = json.loads(e.read() or b"{}")
        return str(doc.get("error") or e.reason)
    except (ValueError, OSError):
        return str(e.reason)


def query_expr(spec: MetricSpec, label: str, values: list[str], lookback: float) -> str:
    """PromQL for one metric over the job's nodes, one series per node.

    A derived metric (``spec.derived``) aggregates its expression over the exporter's series
    (e.g. the lowest per-port ``rate()``); a vanished series leaves ``rate()`` empty after its
    range, so an absence stays an absence there too.
    """
    alt = "|".join(re.escape(v) for v in values)
    alt = alt.replace("\\", "\\\\").replace('"', '\\"')
    devices = ""
    if spec.exclude_devices:
        devices = ',device!~"' + spec.exclude_devices.replace("\\", "\\\\") + '"'
    matchers = f'{label}=~"{alt}"{devices}'
    matcher = f"{{{matchers}}}"
    if spec.derived is not None:
        source, expr = spec.derived
        sel = source + matcher
        if is_name_pattern(source):  # the series a name pattern matches (anchored, RE2)
            pattern = source.replace("\\", "\\\\").replace('"', '\\"')
            sel = f'{{__name__=~"{pattern}",{matchers}}}'
        # a rate over at least 4 scrapes (``lookback`` is 1.5 steps), and at least a minute
        rng = max(60, round(4 * lookback / 1.5))
        step = max(round(lookback / 1.5), 1)
        inner = expr.format(
            sel=sel, matchers=matchers, range=rng, lookback=max(int(lookback), 1), step=step
        )
        return f"{spec.agg} by ({label}) ({inner})"
    sel = spec.name + matcher
    return f"{spec.agg} by ({label}) (last_over_time({sel}[{max(int(lookback), 1)}s]))"


def fetch_job(
    cfg: PromConfig,
    nodes: list[str],
    start: float,
    end: float,
    metrics: list[MetricSpec],
    step: float = 15.0,
) -> pl.DataFrame:
    """The job's long table (``time, node, metric, value``) over ``[start, end]``.

    dcgm-exporter named its host label ``Hostname`` and renamed it ``hostname`` (NVIDIA/
    dcgm-exporter #655, after 4.8.2): with either name configured, the nodes whose GPU series
    do not cover the window under it (:func:`dcgm_short`) are asked for once more under the
    other -- an exporter upgrade, all at once or rolling through the job's nodes, must leave
    no node's GPU metrics out, and no upgraded node judged on their absence.  A sample both
    names give is used once."""
    if not nodes:
        raise ConfigError("the job has no nodes to query")
    frames = _fetch_frames(cfg, nodes, start, end, metrics, step)
    dcgm = [m for m in metrics if m.source == "dcgm"]
    short = []
    if dcgm and cfg.dcgm_label in DCGM_HOST_LABELS:
        short = dcgm_short(frames, {m.name for m in dcgm}, nodes, start, end, step)
    if short:
        other = next(name for name in DCGM_HOST_LABELS if name != cfg.dcgm_label)
        frames += _fetch_frames(replace(cfg, dcgm_label=other), short, start, end, dcgm, step)
    schema = {"t": pl.Float64, "node": pl.Utf8, "metric": pl.Utf8, "value": pl.Float64}
    df = pl.concat(frames) if frames else pl.DataFrame(schema=schema)
    if short:  # one query per (metric, node) answers each step once; two names may both
        df = df.unique(subset=["t", "node", "metric"], keep="first", maintain_order=True)
    return df.select(
        (pl.col("t") * 1e6).cast(pl.Int64).cast(pl.Datetime("us", "UTC")).alias("time"),
        "node",
        "metric",
        "value",
    )


#: dcgm-exporter's host label before and after its #655
DCGM_HOST_LABELS = ("Hostname", "hostname")


def dcgm_short(
    frames: list[pl.DataFrame],
    names: set[str],
    nodes: list[str],
    start: float,
    end: float,
    step: float,
) -> list[str]:
    """The nodes whose GPU series (``names``) start later or stop earlier than two steps
    from the window's ends, or are absent: a node whose dcgm-exporter was upgraded in the
    window answers under the other host label from then on (a dead exporter is asked twice)."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for f in frames:
        if f.height and f["metric"][0] in names:
            node, t = f["node"][0], f["t"]
            first[node] = min(first.get(node, np.inf), float(t.min()))
            last[node] = max(last.get(node, -np.inf), float(t.max()))
    return [
        n
        for n in nodes
        if n not in first or first[n] > start + 2 * step or last[n] < end - 2 * step
    ]


def _fetch_frames(
    cfg: PromConfig,
    nodes: list[str],
    start: float,
    end: float,
    metrics: list[MetricSpec],
    step: float,
) -> list[pl.DataFrame]:
    """One range query per metric; a frame (``t, node, metric, value``) per series found."""
    frames = []
    for spec in metrics:
        label, template = cfg.label(spec)
        back = {template.format(node=n): n for n in nodes}
        data = _get(
            cfg,
            "/api/v1/query_range",
            {
                "query": query_expr(spec, label, list(back), 1.5 * step),
                "start": f"{start:.3f}",
                "end": f"{end:.3f}",
                "step": f"{step:g}s",
            },
        )
        if data.get("resultType", "matrix") != "matrix" or not isinstance(
            data.get("result", []), list
        ):
            raise ServiceError(
                f"Prometheus at {cfg.url} answered a {data.get('resultType')!r} to a range "
                "query (expected a matrix)"
            )
        for series in data.get("result", []):
            if not isinstance(series, dict) or not isinstance(series.get("metric", {}), dict):
                raise ServiceError(f"Prometheus at {cfg.url}: a series is not an object")
            node = back.get(series.get("metric", {}).get(label, ""))
            vals = series.get("values") or []
            if node is None or not vals:
                continue
            t, v = _pairs(vals, cfg.url)
            frames.append(
                pl.DataFrame(
                    {"t": t, "node": node, "metric": spec.name, "value": v},
                    schema={
                        "t": pl.Float64,
                        "node": pl.Utf8,
                        "metric": pl.Utf8,
                        "value": pl.Float64,
                    },
                )
            )
    return frames


def _pairs(vals: object, url: str) -> tuple[np.ndarray, np.ndarray]:
    """``[[time, "value"], ...]`` as two float arrays; anything else is the server's error."""
    if not isinstance(vals, list) or not all(isinstance(p, list) and len(p) == 2 for p in vals):
        raise ServiceError(f"Prometheus at {url}: series values are not [time, value] pairs")
    t = np.array([_num(p[0]) for p in vals])
    v = np.array([_num(p[1]) for p in vals])
    bad = ~np.isfinite(t)  # a sample without a time cannot be placed: drop it (NaN values stay,
    return t[~bad], v[~bad]  # the aligner counts them)


def _num(x: object) -> float:
    try:
        return float(x)  # Prometheus sends "NaN", "+Inf" as strings: float() reads them
    except (TypeError, ValueError):
        return float("nan")
