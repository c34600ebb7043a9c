"""fault_kill9_training.sh's two halves.

snapshot DB OUT: the sessions the killed run's gateway held (state ended,
taken or trained) with at least one answered call, each as the ids of its
answered calls and their rewards: those must not be lost.

check RUN WORK TOTAL CKPT MAX_STALE: after the resumed run finished, counts
what was lost and what was trained twice, telling sessions apart by the ids
of their calls (a session id alone may be reused once its session is gone:
the restarted agent reuses its task ids; metrics rows name each trained
session's rollout task, unique within a process). Exits 1 unless both are 0 and the
steps, versions and staleness hold.
"""
import json
import sqlite3
import sys


def snapshot(db_path, out):
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    pending = {}
    for sid, state in db.execute("SELECT id, state FROM sessions WHERE state IN ('ended', 'taken', 'trained')"):
        answered = db.execute("SELECT id, reward FROM calls WHERE session_id = ? AND state = 'complete'", (sid,)).fetchall()
        if answered:
            pending[sid] = {"state": state, "calls": sorted(r[0] for r in answered), "rewards": {r[0]: r[1] for r in answered}}
    in_flight = db.execute("SELECT COUNT(*) FROM calls WHERE state = 'in_flight'").fetchone()[0]
    json.dump(pending, open(out, "w"))
    handed = sum(1 for p in pending.values() if p["state"] != "ended")
    print(f"at the kill the gateway held {len(pending)} answered sessions not in a committed checkpoint "
          f"({handed} already handed to the trainer), and {in_flight} calls in flight")


def takes(lines):
    """Rollout task -> (session id, the ids of its answered calls), for one process (tasks are unique in it)."""
    out = {}
    for line in lines:
        rec = json.loads(line)
        if "rows" in rec and "session_id" in rec:
            out[rec["task"]] = (rec["session_id"], tuple(sorted(r["interaction_id"] for r in rec["rows"])))
    return out


def trained(rows, taken, what):
    """The call-id tuples of the sessions `rows` trained, resolved by task through `taken`."""
    out = []
    for r in rows:
        for sid, task in zip(r.get("session_ids", []), r.get("tasks", [])):
            if task not in taken or taken[task][0] != sid:
                sys.exit(f"FAIL: step {r['step']} trained session {sid} of task {task}, which no process took ({what})")
            out.append(taken[task][1])
    return out


def check(run, work, total, ckpt, max_stale):
    total, ckpt, max_stale = int(total), int(ckpt), int(max_stale)
    pending = json.load(open(f"{work}/pending.json"))
    rows = [r for r in map(json.loads, open(f"{run}/metrics.jsonl")) if not r.get("eval")]  # step rows; evaluations have their own
    problems = []
    steps = [r["step"] for r in rows]
    if steps != list(range(1, total + 1)):
        problems.append(f"steps are not 1..{total} once each: {steps}")
    for r in rows:
        if r["policy_version"] != r["step"] - 1:
            problems.append(f"step {r['step']} trained version {r['policy_version']}, not {r['step'] - 1}")
        if r["staleness_max"] > max_stale:
            problems.append(f"step {r['step']} trained a sample {r['staleness_max']} versions stale (bound {max_stale})")
        # A token newer than the weights trained was sampled by weights the
        # killed run made after its checkpoint, which the resumed run never had.
        if any(v > r["policy_version"] for v in r.get("sample_versions", [])):
            problems.append(f"step {r['step']} (version {r['policy_version']}) trained samples of versions {r['sample_versions']}")
    before_lines = open(f"{work}/rollouts_before_kill.jsonl").read().splitlines()
    all_lines = open(f"{run}/rollouts.jsonl").read().splitlines()
    after_lines = all_lines[len(before_lines):]
    kept = trained([r for r in rows if r["step"] <= ckpt], takes(before_lines), "before the kill")
    redone = trained([r for r in rows if r["step"] > ckpt], takes(after_lines), "after the resume")
    everything = kept + redone
    twice = len(everything) - len(set(everything))
    dropped_ids = {json.loads(l)["session_id"] for l in after_lines if json.loads(l).get("status") in ("dropped_stale", "dropped_lost_version")}
    lost_version = sum(1 for l in after_lines if json.loads(l).get("status") == "dropped_lost_version")
    pending_calls = {tuple(p["calls"]) for p in pending.values()}
    after_set = set(redone)
    stale = {c for c in pending_calls - after_set if any(sid in dropped_ids for sid, p in pending.items() if tuple(p["calls"]) == c)}
    lost = pending_calls - after_set - stale
    before = [r for r in map(json.loads, open(f"{work}/metrics_before_kill.jsonl")) if not r.get("eval")]
    lost_steps = sum(len(r.get("session_ids", [])) for r in before if r["step"] > ckpt)
    if not pending:
        problems.append("the gateway held nothing at the kill: the test did not test a crash")
    print(f"kill -9 mid-training: {len(pending)} sessions pending at the kill ({lost_steps} trained in steps after the checkpoint, "
          f"lost with the process); after the resume {len(pending_calls & after_set)} of them trained, {len(stale)} dropped as stale "
          f"({lost_version} of them sampled after the checkpoint by weights the resumed run never had); "
          f"lost {len(lost)}, trained twice {twice}")
    if lost:
        problems.append(f"lost sessions (their calls): {sorted(lost)[:5]}")
    # The rewards acknowledged before the kill are the ones trained after it
    # (a one-call session's row carries its reward as is).
    trained_rewards = {row["interaction_id"]: row["reward"] for l in after_lines for row in json.loads(l).get("rows", [])}
    checked = changed = 0
    for p in pending.values():
        if len(p["calls"]) != 1 or p["rewards"].get(p["calls"][0]) is None or p["calls"][0] not in trained_rewards:
            continue
        checked += 1
        if abs(trained_rewards[p["calls"][0]] - p["rewards"][p["calls"][0]]) > 1e-12:
            changed += 1
    print(f"acknowledged rewards: {checked} one-call sessions pending at the kill trained with their reward, {changed} changed")
    if changed:
        problems.append(f"{changed} rewards acknowledged before the kill were trained with another value")
    if checked == 0:
        problems.append("no pending rewarded session was trained after the resume: the reward check checked nothing")
    if twice:
        problems.append(f"{twice} sessions trained twice")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    {"snapshot": snapshot, "check": check}[sys.argv[1]](*sys.argv[2:])
