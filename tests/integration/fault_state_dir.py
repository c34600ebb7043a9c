"""fault_state_dir.sh's client.

during URL ADMIN PID OUT: fills the gateway's disk (prlimit --fsize on PID),
checks every kind of write answers 503 with an OpenAI error body and
changes nothing, frees the disk, checks the same session carries on, and
writes what the client was told to OUT.

after URL ADMIN DB OUT: on the restarted gateway, the database is intact and
holds exactly what the client was told: the finished session exports with
its reward, nothing refused exists. Prints the count lost (must be 0).
"""
import json
import sqlite3
import subprocess
import sys

import httpx


def post(c, path, key, body):
    return c.post(path, headers={"Authorization": f"Bearer {key}"}, json=body)


def chat(c, key, text):
    return post(c, "/v1/chat/completions", key, {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 2})


def expect_503(r, what):
    assert r.status_code == 503, f"{what} with a full disk: {r.status_code} {r.text}"
    err = r.json()["error"]
    assert "state directory" in err["message"] and err["type"] == "server_error", f"{what}: {r.text}"
    assert r.headers.get("retry-after") == "1", f"{what}: no Retry-After"


def during(url, admin, pid, out):
    c = httpx.Client(base_url=url, timeout=60)
    r = post(c, "/rl/start_session", admin, {"task_id": "kept"})
    assert r.status_code == 200, r.text
    kept = r.json()
    assert chat(c, kept["api_key"], "before").status_code == 200
    # The disk fills: no file may grow past 1 KiB (the database already has).
    subprocess.run(["prlimit", "--pid", pid, "--fsize=1024:unlimited"], check=True)
    # Writes already allotted WAL space may still land; push until refused.
    refused = None
    for i in range(100):
        r = post(c, "/rl/start_session", admin, {"task_id": f"refused{i}"})
        if r.status_code != 200:
            refused = r
            break
    assert refused is not None, "start_session never failed with a full disk"
    expect_503(refused, "start_session")
    expect_503(chat(c, kept["api_key"], "while full"), "chat")
    expect_503(post(c, "/rl/set_reward", kept["api_key"], {"reward": 7.0}), "set_reward")
    expect_503(post(c, "/rl/end_session", kept["api_key"], {}), "end_session")
    # Nothing refused was applied: the session is still active, unrewarded.
    r = post(c, "/export_trajectories", admin, {"session_id": kept["session_id"]})
    assert r.status_code == 409, f"export of the still-active session: {r.status_code} {r.text}"
    # Space returns.
    subprocess.run(["prlimit", "--pid", pid, "--fsize=unlimited:unlimited"], check=True)
    assert chat(c, kept["api_key"], "after").status_code == 200
    r = post(c, "/rl/set_reward", kept["api_key"], {"reward": 7.0})
    assert r.status_code == 200, r.text
    assert post(c, "/rl/end_session", kept["api_key"], {}).status_code == 200
    json.dump({"kept": kept["session_id"], "refused_task": refused.request.content.decode()}, open(out, "w"))
    print(f"full disk: start_session, chat, set_reward and end_session answered 503 with the error body; "
          f"after space returned session {kept['session_id']} carried on")


def after(url, admin, db_path, out):
    told = json.load(open(out))
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    ids = [r[0] for r in db.execute("SELECT id FROM sessions")]
    db.close()
    lost = 0
    problems = []
    if integrity != "ok":
        problems.append(f"integrity_check: {integrity}")
    c = httpx.Client(base_url=url, timeout=60)
    r = post(c, "/export_trajectories", admin, {"session_id": told["kept"]})
    if r.status_code != 200:
        lost += 1
        problems.append(f"the finished session did not export: {r.status_code} {r.text}")
    else:
        rows = r.json()["rows"]
        # The call refused while full is not there; the two answered ones are, the reward on the last.
        if len(rows) != 2 or rows[-1]["reward"] != 7.0:
            lost += 1
            problems.append(f"exported {len(rows)} rows, last reward {rows[-1]['reward'] if rows else None}: {r.text[:300]}")
    if any(i.startswith("refused") for i in ids):
        problems.append(f"a session whose start was refused exists: {ids}")
    print(f"after a kill -9 and a restart: integrity {integrity}, sessions {ids}, lost {lost}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems or lost else 0)


if __name__ == "__main__":
    {"during": during, "after": after}[sys.argv[1]](*sys.argv[2:])
