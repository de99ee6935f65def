#!/usr/bin/env python3
"""A client of the idem server in Python, written from docs/protocol.md.

It appends invoices over HTTP, reads them back, and consumes them over the WebSocket into its own
SQLite database: each batch's effects, the ledger of applied event ids and the checkpoint are
committed in one transaction, and the batch is acknowledged only after that commit. Whatever the
connection does (cut mid-frame, closed without a close frame, an append reply lost), every event is
applied exactly once. At the end it checks that against the server and prints a JSON summary.

Needs Python 3.9+ and the `websockets` package (Debian: `apt-get install python3-websockets`).

    python3 idem_client.py --url http://127.0.0.1:4000 --db billing.db
"""

import argparse
import asyncio
import http.client
import json
import os
import sqlite3
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import websockets

# ---------------------------------------------------------------------------------------------------
# HTTP (section 3 of docs/protocol.md)


class IdemError(Exception):
    """An error reply: `{ "error": { "code", "message", "details" } }`."""

    def __init__(self, status, code, message, details):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.details = details


class Http:
    def __init__(self, url, token=None):
        self.url = url.rstrip("/")
        self.token = token

    def request(self, method, path, body=None):
        """One request; returns (status, parsed body). Error replies raise IdemError."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        if self.token:
            req.add_header("authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                return res.status, json.loads(res.read())
        except urllib.error.HTTPError as e:
            err = json.loads(e.read()).get("error", {})
            raise IdemError(e.code, err.get("code"), err.get("message"), err.get("details", {})) from None


def stream_path(stream):
    return "/v1/streams/" + urllib.parse.quote(stream, safe="") + "/events"


# A lost reply (a cut connection) leaves the outcome unknown; these are the errors that can mean it.
NETWORK_ERRORS = (ConnectionError, http.client.HTTPException, urllib.error.URLError, TimeoutError, OSError)


def append(http, stream, events, expected_version, stats):
    """Appends with ids, so a retry after a lost reply is recognised: `200` with `duplicate: true`
    (even though `expectedVersion` no longer holds, as the first attempt moved the stream on)."""
    body = {"events": events, "expectedVersion": expected_version}
    for attempt in range(1, 20):
        try:
            status, reply = http.request("POST", stream_path(stream), body)
        except NETWORK_ERRORS as e:
            stats["append_retries"] += 1
            log(f"append to {stream} lost its reply ({e.__class__.__name__}); sending it again")
            time.sleep(min(0.05 * attempt, 1.0))
            continue
        if reply["duplicate"]:
            stats["duplicate_appends"] += 1
        assert status == (200 if reply["duplicate"] else 201), (status, reply)
        assert reply["ids"] == [e["id"].lower() for e in events], "ids come back lower-cased"
        return reply
    raise RuntimeError(f"append to {stream} kept failing")


def read_stream(http, stream):
    events, from_version = [], 1
    while from_version is not None:
        _, page = http.request("GET", f"{stream_path(stream)}?fromVersion={from_version}&limit=100")
        events += page["events"]
        from_version = page["next"]
    return events


def read_all(http, prefix):
    events, after = [], 0
    while after is not None:
        query = urllib.parse.urlencode({"after": after, "limit": 1000, "streamPrefixes": prefix})
        _, page = http.request("GET", f"/v1/events?{query}")
        events += page["events"]
        after = page["next"]
    return events


def append_invoices(http, streams, per_stream, first_amount, stats):
    """Appends `per_stream` invoice events to each stream, five per request, with expectedVersion."""
    for stream in streams:
        _, head = http.request("GET", f"{stream_path(stream)}?fromVersion=9007199254740991&limit=1")
        version = head["version"]
        for start in range(0, per_stream, 5):
            batch = [
                {
                    "id": str(uuid.uuid4()).upper(),  # any case: the server stores and returns it lower-cased
                    "type": "invoice.issued",
                    "data": {"amount": first_amount + start + i},
                    "metadata": None,  # accepted, stored as {}
                }
                for i in range(min(5, per_stream - start))
            ]
            version = append(http, stream, batch, version, stats)["version"]
            stats["appended"] += len(batch)


# ---------------------------------------------------------------------------------------------------
# The consumer's own database: effects, ledger and checkpoint, committed together


def open_db(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS ledger (event_id TEXT PRIMARY KEY, position INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS checkpoint (consumer TEXT PRIMARY KEY, position INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS totals (
          stream TEXT PRIMARY KEY, invoices INTEGER NOT NULL, amount INTEGER NOT NULL);
        """
    )
    return db


def apply_batch(db, consumer, events):
    """Applies the events not in the ledger, in one transaction with the ledger rows and the
    checkpoint. Returns (applied, skipped). Redelivered events are skipped by the ledger."""
    applied = skipped = 0
    db.execute("BEGIN IMMEDIATE")
    try:
        for e in events:
            cur = db.execute(
                "INSERT OR IGNORE INTO ledger (event_id, position) VALUES (?, ?)", (e["id"], e["position"])
            )
            if cur.rowcount == 0:
                skipped += 1
                continue
            db.execute(
                "INSERT INTO totals (stream, invoices, amount) VALUES (?, 1, ?) ON CONFLICT (stream) "
                "DO UPDATE SET invoices = invoices + 1, amount = amount + excluded.amount",
                (e["stream"], e["data"]["amount"]),
            )
            applied += 1
        db.execute(
            "INSERT INTO checkpoint (consumer, position) VALUES (?, ?) "
            "ON CONFLICT (consumer) DO UPDATE SET position = max(position, excluded.position)",
            (consumer, events[-1]["position"]),
        )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return applied, skipped


def ledger_count(db):
    return db.execute("SELECT count(*) FROM ledger").fetchone()[0]


# ---------------------------------------------------------------------------------------------------
# The WebSocket consumer (section 4 of docs/protocol.md)


class Lost(Exception):
    """The connection or the subscription is gone: subscribe again (resumes after the last ack)."""


class Consumer:
    def __init__(self, args, http, db, total, on_caught_up, stats):
        self.args = args
        self.http = http
        self.db = db
        self.total = total
        self.on_caught_up = on_caught_up
        self.stats = stats
        self.batches = 0
        self.abort_after = {int(n) for n in args.abort_after_batches.split(",") if n}
        self.next_req = 0

    def req(self):
        self.next_req += 1
        return self.next_req

    async def run(self):
        ws_url = self.http.url.replace("http", "ws", 1) + "/v1/subscribe"
        headers = {"Authorization": f"Bearer {self.args.token}"} if self.args.token else {}
        backoff = 0.05
        while True:
            try:
                async with connect(ws_url, headers) as ws:
                    self.stats["connections"] += 1
                    await self.session(ws)
                    return
            except (Lost, OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as e:
                self.stats["reconnects"] += 1
                log(f"connection lost ({e.__class__.__name__}: {e}); subscribing again")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    async def recv(self, ws, silence):
        """The next message; a silence of three heartbeats means a dead connection."""
        try:
            return json.loads(await asyncio.wait_for(ws.recv(), silence))
        except asyncio.TimeoutError:
            raise Lost(f"nothing from the server for {silence} s") from None

    async def session(self, ws):
        hello = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert hello["type"] == "hello" and hello["protocol"] == 1, hello
        silence = 3 * hello["heartbeatMs"] / 1000
        subscribe_req = self.req()
        await ws.send(
            json.dumps(
                {
                    "type": "subscribe",
                    "sub": "billing",
                    "consumer": self.args.consumer,
                    # The filter is part of the identity: sent on every subscribe, not only the first.
                    "filter": {"streamPrefixes": [self.args.prefix]},
                    # Wait while the previous connection's lease is still being released.
                    "standby": True,
                    "batchSize": self.args.batch_size,
                    "maxInFlight": 4 * self.args.batch_size,
                    "owner": f"python-example pid {os.getpid()}",
                    "req": subscribe_req,
                }
            )
        )
        pending_acks = {}  # req -> position
        unsubscribe_req = None
        while True:
            msg = await self.recv(ws, silence)
            kind = msg["type"]
            if kind == "subscribed" and msg["req"] == subscribe_req:
                log(f"subscribed: epoch {msg['epoch']}, resuming after position {msg['position']}")
            elif kind == "events":
                await self.on_events(ws, msg, pending_acks)
            elif kind == "caught_up":
                self.on_caught_up()
            elif kind == "ok":
                pending_acks.pop(msg["req"], None)
                if msg["req"] == unsubscribe_req:
                    # `closed` came first; nothing more comes for this subscription.
                    await ws.close()
                    return
            elif kind == "error":
                # By its fields: `req` answers that request; `sub` alone ends the subscription.
                code = msg["error"]["code"]
                if "req" in msg:
                    if code in ("fenced", "consumer_busy", "unavailable", "closed"):
                        raise Lost(f"request {msg['req']} failed: {code}")
                    raise RuntimeError(f"request {msg['req']} refused: {msg['error']}")
                if "sub" in msg:
                    log(f"the subscription ended: {code}; `closed` follows")
                    continue
                raise RuntimeError(f"the server could not read a message: {msg['error']}")
            elif kind == "closed":
                if unsubscribe_req is None:
                    raise Lost(f"subscription closed: {msg['reason']}")
            elif kind in ("heartbeat", "pong"):
                pass
            if unsubscribe_req is None and not pending_acks and ledger_count(self.db) == self.total:
                unsubscribe_req = self.req()
                await ws.send(json.dumps({"type": "unsubscribe", "sub": "billing", "req": unsubscribe_req}))

    async def on_events(self, ws, msg, pending_acks):
        events = msg["events"]
        applied, skipped = apply_batch(self.db, self.args.consumer, events)
        self.stats["applied"] += applied
        self.stats["redelivered_skipped"] += skipped
        self.batches += 1
        if self.batches in self.abort_after:
            # Committed but not acknowledged: drop the TCP connection without a close frame. The
            # server releases the lease at once and redelivers this batch to the next subscription.
            self.stats["self_aborts"] += 1
            log(f"batch {self.batches}: committed, dropping the connection before the ack")
            ws.transport.abort()
            raise Lost("dropped on purpose")
        req, position = self.req(), events[-1]["position"]
        pending_acks[req] = position
        await ws.send(json.dumps({"type": "ack", "sub": "billing", "position": position, "req": req}))


def connect(url, headers):
    # websockets >= 14 names the argument additional_headers; older versions extra_headers.
    major = int(websockets.__version__.split(".")[0])
    key = "additional_headers" if major >= 14 else "extra_headers"
    return websockets.connect(url, max_size=64 * 1024 * 1024, close_timeout=1, **{key: headers})


def log(text):
    print(f"[python client] {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------


async def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the idem server, e.g. http://127.0.0.1:4000")
    p.add_argument("--db", required=True, help="this consumer's SQLite database file")
    p.add_argument("--token", help="a bearer token with the read, append and subscribe scopes")
    p.add_argument("--prefix", default=f"pyinvoice-{uuid.uuid4().hex[:8]}-", help="stream name prefix")
    p.add_argument("--consumer", default=None, help="consumer name (default: py_billing_<prefix>_v1)")
    p.add_argument("--streams", type=int, default=10)
    p.add_argument("--events-per-stream", type=int, default=40, help="appended before consuming")
    p.add_argument("--live-events-per-stream", type=int, default=10, help="appended once caught up")
    p.add_argument("--batch-size", type=int, default=25)
    p.add_argument("--abort-after-batches", default="2,7", help="drop the socket after these batches")
    args = p.parse_args()
    args.consumer = args.consumer or "py_billing_" + args.prefix.strip("-").replace("-", "_") + "_v1"

    http = Http(args.url, args.token)
    stats = dict.fromkeys(
        ["appended", "append_retries", "duplicate_appends", "connections", "reconnects", "self_aborts",
         "applied", "redelivered_skipped"], 0)
    streams = [f"{args.prefix}{i}" for i in range(1, args.streams + 1)]
    append_invoices(http, streams, args.events_per_stream, 100, stats)
    for s in streams:
        assert len(read_stream(http, s)) == args.events_per_stream, s

    db = open_db(args.db)
    live = {"task": None}
    expected_total = args.streams * (args.events_per_stream + args.live_events_per_stream)

    def on_caught_up():
        # Live delivery: append more once caught up, from a thread while the consumer keeps reading.
        if live["task"] is None:
            live["task"] = asyncio.get_running_loop().run_in_executor(
                None, append_invoices, http, streams, args.live_events_per_stream, 1000, stats
            )

    consumer = Consumer(args, http, db, expected_total, on_caught_up, stats)
    await consumer.run()
    if live["task"] is not None:
        await live["task"]

    # Exactly once, checked against the server: every event of these streams is in the ledger once,
    # and the totals equal the sums of the events.
    events = read_all(http, args.prefix)
    ledger = dict(db.execute("SELECT event_id, position FROM ledger"))
    assert len(events) == expected_total == len(ledger), (len(events), expected_total, len(ledger))
    assert all(ledger.get(e["id"]) == e["position"] for e in events), "ledger matches the store"
    want = {}
    for e in events:
        n, amount = want.get(e["stream"], (0, 0))
        want[e["stream"]] = (n + 1, amount + e["data"]["amount"])
    got = {s: (n, a) for s, n, a in db.execute("SELECT stream, invoices, amount FROM totals")}
    assert got == want, "totals equal the sums of the events"
    checkpoint = db.execute(
        "SELECT position FROM checkpoint WHERE consumer = ?", (args.consumer,)
    ).fetchone()[0]
    _, info = http.request("GET", f"/v1/consumers/{urllib.parse.quote(args.consumer, safe='')}")
    assert info["position"] == checkpoint == max(e["position"] for e in events), (info, checkpoint)
    print(json.dumps({"ok": True, "consumer": args.consumer, "events": len(events), "ledger": len(ledger),
                      "checkpoint": checkpoint, "serverPosition": info["position"], **stats}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
