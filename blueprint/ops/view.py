"""The read-only web view: server-rendered HTML (no front-end toolchain, no script), refreshed by
the browser every few seconds. The application page draws the graph (streamlets and topics, left
to right in the direction data flows) as inline SVG with each topic's rate and lag, then tables
of streamlets, topics, recent dead letters (metadata only) and savepoints."""

from __future__ import annotations

import datetime as dt
from html import escape
from urllib.parse import quote


from .model import ApplicationSummary, ApplicationView, DeadLetterView, SavepointView, StreamletView, batch_ids_text

REFRESH_SECONDS = 2

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.2rem;color:#1d2433;background:#f7f8fa}
h1{font-size:1.3rem;margin:0 0 .2rem} h2{font-size:1.05rem;margin:1.4rem 0 .4rem}
.meta{color:#5b6478;margin-bottom:.8rem} a{color:#2456c4}
table{border-collapse:collapse;background:#fff;font-size:.85rem}
th,td{border:1px solid #dde1ea;padding:.25rem .5rem;text-align:right;white-space:nowrap}
th{background:#eef1f6} td.l,th.l{text-align:left}
.running{color:#137333} .failed{color:#b3261e} .stopped,.unknown,.starting{color:#8a6d00}
svg{background:#fff;border:1px solid #dde1ea;max-width:100%;height:auto}
.empty{color:#5b6478;font-style:italic}
"""


def _num(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _time(seconds: float | None) -> str:
    if not seconds:
        return "–"
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def page(title: str, body: str, refresh: bool = True) -> str:
    """A complete HTML page: `title` (escaped), `body` (HTML as given) and the stylesheet; with `refresh`, the
    page reloads itself every REFRESH_SECONDS."""
    head = f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">' if refresh else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{head}<title>{escape(title)}</title>'
            f"<style>{_STYLE}</style></head><body>{body}</body></html>")


def app_path(namespace: str, name: str) -> str:
    """The web view's path of an application's page, `/ui/namespaces/<ns>/applications/<name>` (URL-quoted)."""
    return f"/ui/namespaces/{quote(namespace)}/applications/{quote(name)}"


def applications_page(apps: list[ApplicationSummary]) -> str:
    """The page listing `apps`: name (a link to its page), namespace, app id, phase and ready streamlets."""
    rows = "".join(f'<tr data-app="{escape(a.name)}"><td class="l"><a href="{app_path(a.namespace, a.name)}">{escape(a.name)}</a></td>'
                   f'<td class="l">{escape(a.namespace)}</td><td class="l">{escape(a.app_id)}</td>'
                   f'<td class="l">{escape(a.phase)}</td><td>{escape(a.ready)}</td></tr>' for a in apps)
    table = ('<table><tr><th class="l">application</th><th class="l">namespace</th><th class="l">app id</th>'
             f'<th class="l">phase</th><th>ready</th></tr>{rows}</table>') if apps else '<p class="empty">no applications</p>'
    return page("Streamlets: applications", f"<h1>Applications</h1>{table}")


def application_page(app: ApplicationView, dead_letters: list[DeadLetterView], savepoints: list[SavepointView]) -> str:
    """An application's page: its graph (graph_svg), streamlets with rates and lag, topics, the given dead
    letters and savepoints."""
    meta = (f'<div class="meta">namespace {escape(app.namespace)} · app id {escape(app.app_id)} · phase '
            f'<b>{escape(app.phase)}</b> · ready {escape(app.ready)} · dead letters {_num(app.dead_letters)} · '
            f'<a href="/">all applications</a> · <a href="/api/v1/namespaces/{quote(app.namespace)}/applications/{quote(app.name)}">JSON</a></div>')
    return page(f"{app.name}: streamlets", f"<h1>{escape(app.name)}</h1>{meta}{graph_svg(app)}{_streamlets(app)}{_topics(app)}"
                f"{_dead_letters(dead_letters)}{_savepoints(savepoints)}")


def _streamlets(app: ApplicationView) -> str:
    head = ("streamlet", "class", "status", "records in", "records out", "in/s", "processed/s", "batch s", "watermark (UTC)",
            "state rows", "state MB", "malformed", "restarts", "quarantined", "lag", "executors", "autoscaler")
    rows = []
    for s in app.streamlets:
        memory = None if s.state_memory_bytes is None else s.state_memory_bytes / 1e6
        cells = [_num(s.records_in), _num(s.records_out), _num(s.input_rate, 1), _num(s.processed_rate, 1),
                 _num(s.batch_duration_seconds, 2), _time(s.watermark), _num(s.state_rows), _num(memory, 1), _num(s.malformed),
                 _num(s.restarts), _num(s.quarantined), _num(s.lag), _executors(s), _autoscaler(s)]
        rows.append(f'<tr data-streamlet="{escape(s.name)}" data-processed-rate="{s.processed_rate or 0}">'
                    f'<td class="l">{escape(s.name)}</td><td class="l">{escape(s.class_name)}</td>'
                    f'<td class="l {escape(s.status)}">{escape(s.status)}</td>' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return _table("Streamlets", head, rows, left={0, 1, 2})


def _executors(s: StreamletView) -> str:
    """Executors running, and → the autoscaler's target when it differs."""
    a = s.autoscaling
    target = f" → {a.target_executors}" if a and a.target_executors not in (None, s.executors) else ""
    return f"{_num(s.executors)}{escape(target)}"


def _autoscaler(s: StreamletView) -> str:
    """Its mode and what holds it or what it did last; the reason as the cell's title."""
    a = s.autoscaling
    if a is None:
        return "off"
    state = f"held: {a.held}" if a.held else f"{a.direction}" if a.direction and a.direction != "none" else \
        f"last {a.last_scaled}" if a.last_scaled else "steady"
    return f'<span title="{escape(a.reason or "")}">{escape(a.mode)} · {escape(state)}</span>'


def _topics(app: ApplicationView) -> str:
    head = ("topic", "Kafka topic", "end offset", "records/s", "from", "to", "lag")
    rows = []
    for t in app.topics:
        lag = ", ".join(f"{escape(c)} {v:,}" for c, v in sorted(t.lag.items())) or "–"
        rows.append(f'<tr data-topic="{escape(t.id)}" data-rate="{t.rate or 0}"><td class="l">{escape(t.id)}</td>'
                    f'<td class="l">{escape(t.name)}</td><td>{_num(t.end_offset)}</td><td>{_num(t.rate, 1)}</td>'
                    f'<td class="l">{escape(", ".join(t.producers))}</td><td class="l">{escape(", ".join(t.consumers))}</td>'
                    f'<td class="l">{lag}</td></tr>')
    return _table("Topics", head, rows, left={0, 1, 4, 5, 6})


def _dead_letters(letters: list[DeadLetterView]) -> str:
    head = ("time (UTC)", "streamlet", "inlet", "topic", "partition", "offset", "bytes", "error")
    rows = [f'<tr><td class="l">{_time(d.timestamp)}</td><td class="l">{escape(d.streamlet)}</td><td class="l">{escape(d.inlet)}</td>'
            f'<td class="l">{escape(d.topic)}</td><td>{d.partition}</td><td>{d.offset:,}</td><td>{d.value_bytes:,}</td>'
            f'<td class="l">{escape(d.error[:200])}</td></tr>' for d in letters]
    return _table("Recent dead letters", head, rows, left={0, 1, 2, 3, 7}, empty="none")


def _savepoints(savepoints: list[SavepointView]) -> str:
    head = ("time", "streamlet", "savepoint", "batch ids", "reason", "location")
    rows = [f'<tr><td class="l">{escape(s.time)}</td><td class="l">{escape(s.streamlet)}</td><td class="l">{escape(s.name)}</td>'
            f'<td class="l">{escape(batch_ids_text(s.batch_ids))}</td>'
            f'<td class="l">{escape(s.reason or "")}</td><td class="l">{escape(s.location)}</td></tr>' for s in savepoints]
    return _table("Savepoints", head, rows, left=set(range(6)), empty="none")


def _table(title: str, head: tuple[str, ...], rows: list[str], left: set[int], empty: str = "none") -> str:
    """A table whose columns `left` (indexes) are left-aligned, the others (figures) right-aligned."""
    if not rows:
        return f'<h2>{escape(title)}</h2><p class="empty">{escape(empty)}</p>'
    ths = "".join(f'<th class="{"l" if i in left else ""}">{escape(h)}</th>' for i, h in enumerate(head))
    return f"<h2>{escape(title)}</h2><table><tr>{ths}</tr>{''.join(rows)}</table>"


# --- the graph -------------------------------------------------------------------------------

_SW, _SH, _TW, _TH, _GAP_X, _GAP_Y, _PAD = 200, 62, 190, 56, 60, 24, 16


def _columns(app: ApplicationView) -> tuple[dict[str, int], dict[str, int]]:
    """Columns of streamlets (even) and topics (odd), left to right in the direction data flows."""
    producers = {t.id: {p.split(".", 1)[0] for p in t.producers} for t in app.topics}
    consumers = {t.id: {c.split(".", 1)[0] for c in t.consumers} for t in app.topics}
    depth = {s.name: 0 for s in app.streamlets}
    for _ in range(len(depth) + 1):  # longest path; a cycle (verify refuses them) just stops growing
        changed = False
        for t in app.topics:
            for c in consumers[t.id]:
                for p in producers[t.id]:
                    if p in depth and c in depth and depth[c] < depth[p] + 1 and depth[p] < len(depth):
                        depth[c] = depth[p] + 1
                        changed = True
        if not changed:
            break
    streamlet_col = {name: 2 * d + 1 for name, d in depth.items()}
    topic_col = {}
    for t in app.topics:
        if producers[t.id] & set(depth):
            topic_col[t.id] = max(streamlet_col[p] for p in producers[t.id] if p in depth) + 1
        elif consumers[t.id] & set(depth):
            topic_col[t.id] = min(streamlet_col[c] for c in consumers[t.id] if c in depth) - 1
        else:
            topic_col[t.id] = 0
    return streamlet_col, topic_col


def graph_svg(app: ApplicationView) -> str:
    """The application as an inline SVG: streamlets and topics in columns (producers left of their topics,
    consumers right), edges with the topics' rates."""
    streamlet_col, topic_col = _columns(app)
    width_of = {c: (_SW if c % 2 else _TW) for c in set(streamlet_col.values()) | set(topic_col.values())}
    cols = sorted(width_of)
    x_of: dict[int, int] = {}
    x = _PAD
    for c in cols:
        x_of[c] = x
        x += width_of[c] + _GAP_X
    rows: dict[int, int] = {}
    pos: dict[tuple[str, str], tuple[float, float, float, float]] = {}
    placing: list[tuple[str, list[str], dict[str, int], int, int]] = [
        ("s", [s.name for s in app.streamlets], streamlet_col, _SW, _SH), ("t", [t.id for t in app.topics], topic_col, _TW, _TH)]
    for kind, items, col_of, w, h in placing:
        for item in items:
            c = col_of[item]
            r = rows.get(c, 0)
            rows[c] = r + 1
            pos[(kind, item)] = (x_of[c], _PAD + r * (max(_SH, _TH) + _GAP_Y), w, h)
    height = _PAD * 2 + max(rows.values(), default=1) * (max(_SH, _TH) + _GAP_Y)
    width = max(x, 300)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="application graph" font-family="system-ui,sans-serif" font-size="12">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
             '<path d="M0,0 L10,5 L0,10 z" fill="#7a849a"/></marker></defs>']
    for t in app.topics:
        tx, ty, tw, th = pos[("t", t.id)]
        for producer in t.producers:
            if ("s", producer.split(".", 1)[0]) in pos:
                sx, sy, sw, sh = pos[("s", producer.split(".", 1)[0])]
                parts.append(_line(sx + sw, sy + sh / 2, tx, ty + th / 2))
        for consumer in t.consumers:
            if ("s", consumer.split(".", 1)[0]) in pos:
                cx, cy, _, ch = pos[("s", consumer.split(".", 1)[0])]
                parts.append(_line(tx + tw, ty + th / 2, cx, cy + ch / 2))
    colors = {"running": "#137333", "failed": "#b3261e"}
    for s in app.streamlets:
        x0, y0, sw, sh = pos[("s", s.name)]
        color = colors.get(s.status, "#8a6d00")
        parts.append(f'<g class="streamlet" data-streamlet="{escape(s.name)}"><rect x="{x0}" y="{y0}" width="{sw}" height="{sh}" rx="6" '
                     f'fill="#eef3fd" stroke="{color}" stroke-width="2"/>'
                     f'<text x="{x0 + 10}" y="{y0 + 18}" font-weight="bold">{escape(s.name)}</text>'
                     f'<text x="{x0 + sw - 10}" y="{y0 + 18}" text-anchor="end" fill="{color}">{escape(s.status)}</text>'
                     f'<text x="{x0 + 10}" y="{y0 + 36}">{_num(s.processed_rate, 0)} rec/s · in {_num(s.records_in)}</text>'
                     f'<text x="{x0 + 10}" y="{y0 + 52}" fill="#5b6478">out {_num(s.records_out)} · lag {_num(s.lag)}</text></g>')
    for t in app.topics:
        x0, y0, tw, th = pos[("t", t.id)]
        mid = x0 + tw / 2
        lag = sum(t.lag.values()) if t.lag else None
        parts.append(f'<g class="topic" data-topic="{escape(t.id)}"><rect x="{x0}" y="{y0}" width="{tw}" height="{th}" rx="18" '
                     f'fill="#fff7e6" stroke="#c98a00"/>'
                     f'<text x="{mid}" y="{y0 + 18}" text-anchor="middle" font-weight="bold">{escape(t.id)}</text>'
                     f'<text x="{mid}" y="{y0 + 34}" text-anchor="middle">{_num(t.rate, 0)} rec/s</text>'
                     f'<text x="{mid}" y="{y0 + 49}" text-anchor="middle" fill="#5b6478">lag {_num(lag)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _line(x1: float, y1: float, x2: float, y2: float) -> str:
    return f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#7a849a" stroke-width="1.5" marker-end="url(#arrow)"/>'


def login_page(error: str | None = None) -> str:
    """The sign-in form (a Kubernetes bearer token), with `error` shown above it when given."""
    note = f'<p class="failed">{escape(error)}</p>' if error else ""
    return page("Streamlets: sign in", "<h1>Sign in</h1>"
                "<p>Paste a Kubernetes bearer token (for example <code>kubectl create token NAME</code>); "
                "you see the applications your RBAC rights allow.</p>" + note +
                '<form method="post" action="/login"><input type="password" name="token" size="60" autocomplete="off"> '
                '<button type="submit">Sign in</button></form>', refresh=False)
