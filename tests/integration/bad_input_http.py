"""bad_input_http.sh's client: sends each kind of bad input and checks the answer.

The gateway runs with max_threads 2, max_queued 1, client_timeout_s 1,
max_request_bytes 64 KiB. Raw sockets where a client library would not send
the bad bytes (or would not stall); httpx for the rest.
"""
import json
import os
import socket
import sys
import time
from urllib.parse import urlparse

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from raw_http import read_answer  # noqa: E402

URL, ADMIN = sys.argv[1], sys.argv[2]
HOST, PORT = urlparse(URL).hostname, urlparse(URL).port
c = httpx.Client(base_url=URL, timeout=30)
passed = []


def case(name):
    def wrap(f):
        f()
        passed.append(name)
        print("ok:", name)
    return wrap


def raw(data, wait_s=5.0, send_rest=None):
    """Sends bytes on a fresh connection; returns (status, headers, body) of the answer, or None if closed silently."""
    s = socket.create_connection((HOST, PORT), timeout=wait_s)
    s.sendall(data)
    if send_rest:
        send_rest(s)
    answer = read_answer(s)
    s.close()
    return None if answer is None else (answer[0], answer[2], answer[3])


def post_raw(path, body, key, extra=b""):
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra + b"\r\n" + body


def error_of(status_headers_body, status):
    assert status_headers_body is not None, f"expected {status}, the connection closed without an answer"
    st, _, body = status_headers_body
    assert st == status, f"expected {status}, got {st}: {body[:300]!r}"
    return json.loads(body)["error"]["message"]


# A session whose record must survive every case below.
r = c.post("/rl/start_session", headers={"Authorization": f"Bearer {ADMIN}"}, json={"task_id": "survivor"})
assert r.status_code == 200, r.text
KEY, SID = r.json()["api_key"], r.json()["session_id"]
chat = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
r = c.post("/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"}, json=chat)
assert r.status_code == 200, r.text
first_call = r.json()["id"]


@case("invalid UTF-8: 400 naming the byte offset")
def _():
    body = b'{"model": "m", "messages": [{"role": "user", "content": "ab\xff"}]}'
    msg = error_of(raw(post_raw("/v1/chat/completions", body, KEY)), 400)
    offset = body.index(b"\xff")
    assert f"byte {offset}" in msg, msg


@case("a UTF-8-encoded lone surrogate (ED A0 80): 400 naming the byte offset")
def _():
    body = b'{"model": "m", "messages": [{"role": "user", "content": "\xed\xa0\x80"}]}'
    msg = error_of(raw(post_raw("/v1/chat/completions", body, KEY)), 400)
    offset = body.index(b"\xed")
    assert f"byte {offset}" in msg, msg


@case("an escaped lone surrogate (\\ud800): 400, not a crash")
def _():
    r = c.post("/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
               content=b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}')
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"], r.text


@case("a body over max_request_bytes: 413 before the body is sent")
def _():
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {100 << 20}\r\n\r\n").encode()
    t0 = time.monotonic()
    msg = error_of(raw(head), 413)  # not one byte of the 100 MiB body is sent
    assert "exceeds the limit of 65536" in msg and time.monotonic() - t0 < 2, msg


@case("a client stalling in its headers: 408 within the client timeout, and the thread is freed")
def _():
    t0 = time.monotonic()
    answer = raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", wait_s=10)
    took = time.monotonic() - t0
    assert answer is None or answer[0] == 408, answer
    assert took < 5, f"the stalled connection was held {took:.1f} s"


@case("a client stalling in its body: 408 naming the timeout")
def _():
    body = json.dumps(chat).encode()
    msg = error_of(raw(post_raw("/v1/chat/completions", body, KEY)[:-len(body) + 10], wait_s=10), 408)
    assert "client_timeout_s" in msg, msg


@case("idle connections hold no thread: with 2 threads and 5 silent connections, /health answers at once")
def _():
    c.close()
    hold = [socket.create_connection((HOST, PORT)) for _ in range(5)]
    time.sleep(0.2)
    t0 = time.monotonic()
    answer = raw(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", wait_s=5)
    took = time.monotonic() - t0
    for s in hold:
        s.close()
    assert answer is not None and answer[0] == 200 and took < 1, (answer, took)


c = httpx.Client(base_url=URL, timeout=30)


@case("oversized max_tokens: clamped (200; here to gateway.max_completion_tokens 16); beyond 2^40 or not a positive integer: 400")
def _():
    h = {"Authorization": f"Bearer {KEY}"}
    r = c.post("/v1/chat/completions", headers=h, json={**chat, "max_tokens": 10**12})
    assert r.status_code == 200 and 1 <= r.json()["usage"]["completion_tokens"] <= 16, r.text
    for bad in (10**20, -1, 0, 1.5, "8"):
        r = c.post("/v1/chat/completions", headers=h, json={**chat, "max_tokens": bad})
        assert r.status_code == 400 and "max_tokens" in r.json()["error"]["message"], (bad, r.text)


@case("nothing was lost: the session still has its calls and takes its reward")
def _():
    h = {"Authorization": f"Bearer {KEY}"}
    assert c.post("/rl/set_reward", headers=h, json={"interaction_id": first_call, "reward": 2.5}).status_code == 200
    assert c.post("/rl/end_session", headers=h, json={}).status_code == 200
    r = c.post("/export_trajectories", headers={"Authorization": f"Bearer {ADMIN}"}, json={"session_id": SID})
    rows = r.json()["rows"]
    assert r.status_code == 200 and len(rows) == 2 and rows[0]["reward"] == 2.5, r.text[:400]


print(f"bad input over HTTP: {len(passed)} cases passed, 0 failed")
