"""The fleet aggregation written in DuckDB SQL over the same JSONL files (the baseline).

    python benchmarks/fleet_duckdb.py DIR [--inventory CSV] [--out report.json]

It computes every per-node counter that ``gpu_triage.ops.fleet_read`` folds line by line
(runs, latest run, runs per rule, bad findings per GPU, Xid codes per driver, per-GPU
utilisation and temperature sums), builds the same ``NodeState`` objects from the result
and runs the same analysis, so ``bench_fleet`` can compare the two reports field for
field. Needs the ``bench`` extra (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

from gpu_triage.io import jsonio
from gpu_triage.ops.fleet import FleetRead, Inventory, NodeState, analyse
from gpu_triage.ops.fleet_read import DEFAULT_UTIL_TARGET, GpuWindow, expand

COLUMNS = {
    "host": "VARCHAR",
    "ts": "VARCHAR",
    "driver": "VARCHAR",
    "rack": "VARCHAR",
    "row": "VARCHAR",
    "findings": "STRUCT(rule VARCHAR, sev VARCHAR, gpu VARCHAR, xid BIGINT)[]",
    "xids": "BIGINT[]",
    "gpus": (
        "STRUCT(bus VARCHAR, serial VARCHAR, name VARCHAR, vbios VARCHAR, uuid VARCHAR, "
        "temp DOUBLE, util DOUBLE)[]"
    ),
}
SEV = "CASE {0} WHEN 'critical' THEN 2 WHEN 'warning' THEN 1 ELSE 0 END"
NAMES = {0: "info", 1: "warning", 2: "critical"}


def aggregate(files: list[Path], target: float) -> dict[str, NodeState]:
    con = duckdb.connect()
    cols = "{" + ", ".join(f"'{k}': '{v}'" for k, v in COLUMNS.items()) + "}"
    listing = "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in files) + "]"
    con.execute(
        f"""CREATE TEMP TABLE h AS
        SELECT *, coalesce(nullif(driver, ''), '?') AS drv
        FROM read_json({listing}, format='newline_delimited', columns={cols},
                       filename=true, maximum_object_size=16777216)"""
    )
    con.execute(
        """CREATE TEMP TABLE f AS
        SELECT host, drv, x.f.rule AS rule, x.f.sev AS sev, coalesce(x.f.gpu, '') AS gpu,
               x.f.xid AS xid, gpus
        FROM h, unnest(findings) AS x(f)"""
    )
    nodes: dict[str, NodeState] = {}
    for host, runs, first, last_ts, rules, gpus, driver, rack, row, drivers in con.execute(
        """SELECT host, count(*), min(ts) FILTER (ts <> ''),
                  max(ts), arg_max([x.rule FOR x IN findings], coalesce(ts, '')),
                  arg_max(gpus, coalesce(ts, '')), arg_max(driver, coalesce(ts, '')),
                  arg_max(rack, coalesce(ts, '')), arg_max(row, coalesce(ts, '')),
                  list(DISTINCT driver) FILTER (driver IS NOT NULL AND driver <> '')
           FROM h GROUP BY host"""
    ).fetchall():
        st = NodeState(runs=runs, first_ts=first or "")
        st.last = (last_ts or "", 0, 0)
        st.last_rules = list(rules or [])
        st.gpus = [dict(g) for g in gpus or []]
        st.driver, st.rack, st.row = driver, rack, row
        st.drivers = set(drivers or [])
        nodes[host] = st
    for host, rule, runs in con.execute(  # runs in which a rule fired, once per run
        """SELECT host, rule, count(*) FROM
           (SELECT host, unnest(list_distinct([x.rule FOR x IN findings])) AS rule FROM h)
           GROUP BY ALL"""
    ).fetchall():
        nodes[host].rule_runs[rule] = runs
    for host, rule, sev in con.execute(
        f"SELECT host, rule, max({SEV.format('sev')}) FROM f GROUP BY ALL"
    ).fetchall():
        nodes[host].rule_sev[rule] = NAMES[sev]
    for host, key, n, rules, sev in con.execute(
        f"""SELECT host, gpu || '|' || coalesce(
                   list_filter(gpus, lambda g: g.bus = gpu)[1].serial, ''),
                   count(*), list(DISTINCT rule), max({SEV.format("sev")})
            FROM f WHERE gpu <> '' AND sev IN ('warning', 'critical') GROUP BY ALL"""
    ).fetchall():
        st = nodes[host]
        st.gpu_bad[key] = n
        st.gpu_rules[key] = set(rules)
        st.gpu_sev[key] = NAMES[sev]
    for host, code, drv, gpus in con.execute(
        """SELECT host, xid, drv, list(DISTINCT gpu) FILTER (gpu <> '') FROM f
           WHERE xid IS NOT NULL GROUP BY ALL
           UNION ALL
           SELECT host, c, drv, [] FROM (SELECT host, drv, unnest(xids) AS c FROM h)
           GROUP BY ALL"""
    ).fetchall():
        nodes[host].xids.setdefault((code, drv), set()).update(gpus or [])
    bands = ("util < 10", "util >= 10 AND util < 70", "util >= 70")  # fleet_read.BAND_BOUNDS
    per_band = ", ".join(
        f"count(temp) FILTER ({b}), coalesce(sum(temp) FILTER ({b}), 0), "
        f"coalesce(sum(temp * temp) FILTER ({b}), 0)"
        for b in bands
    )
    for host, bus, serial, un, us, usq, at, tn, tsum, *band in con.execute(
        f"""SELECT host, bus, first(serial), count(util), coalesce(sum(util), 0),
                   coalesce(sum(util * util), 0), count(*) FILTER (util >= {target}),
                   count(temp), coalesce(sum(temp), 0), {per_band}
            FROM (SELECT host, unnest(g, recursive := true) FROM (
                    SELECT host, unnest(list_transform(gpus, lambda x, i: struct_pack(
                        bus := coalesce(nullif(x.bus, ''), '#' || (i - 1)::VARCHAR),
                        serial := coalesce(x.serial, ''),
                        util := CASE WHEN x.util BETWEEN 0 AND 100 THEN x.util END,
                        temp := CASE WHEN x.temp BETWEEN -100 AND 250 THEN x.temp END
                    ))) AS g FROM h))
            GROUP BY host, bus"""
    ).fetchall():
        nodes[host].window[bus] = GpuWindow(
            serial,
            un,
            us,
            usq,
            at,
            tn,
            tsum,
            [int(band[i]) for i in (0, 3, 6)],
            [float(band[i]) for i in (1, 4, 7)],
            [float(band[i]) for i in (2, 5, 8)],
        )
    return nodes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--inventory", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    files = [f for f in expand([a.dir]) if f.suffix == ".jsonl"]
    nodes = aggregate(files, DEFAULT_UTIL_TARGET)
    runs = sum(st.runs for st in nodes.values())
    rep = analyse(FleetRead(nodes, runs, [], 0, len(files)), Inventory.load(a.inventory))
    text = jsonio.dump_model(rep, indent=2) + "\n"
    if a.out:
        a.out.write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
