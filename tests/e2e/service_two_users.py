"""e2e.service_two_users (issue #37): the managed service with two users and
two jobs on one base model, in one deployment.

  - the operator adds users and keys with `areal-host tenants`; each user
    starts a LoRA job over HTTP (alice: "digit after D", bob: "digit before
    D"); both share the one engine of the base model;
  - each user's real agent (examples/quickstart_agent, the openai npm
    client) trains against its job's base URL with the user's key;
  - while they train, every route of the service is tried with the other
    user's key and session keys: all 401/403/404; quotas answer 429;
  - the service is killed with -9 mid-training and started again: no
    acknowledged session is lost or trained twice (fault_kill9_training.py's
    check, per job), jobs resume from their checkpoints and finish;
  - both agents learn: from about 0.1, the last 50 steps' mean reward reaches
    0.8 and the final greedy evaluation 0.85, so at most one of the nine
    questions may stay wrong (see LEARNED below);
  - Phase 3: each user's model answers by "experiment/trial" through the
    OpenAI SDK (the agent in eval mode, greedy), scoring exactly what the
    job's final evaluation scored; the other user gets 404.

  service_two_users.py AREAL_HOST SOURCE_DIR WORK [isolation]   (WORK/model: the formatted base)

With `isolation` (security.service_isolation): no agents and no kill; after
the isolation checks each owner pauses, resumes and cancels their job, and a
cancelled job neither takes sessions nor answers.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

host, src, work = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
ISOLATION = len(sys.argv) > 4 and sys.argv[4] == "isolation"
# 200 steps: both jobs are above 0.9 from about step 100 (a 350-step run, 25-step
# windows: alice 0.10 0.34 0.83 0.92 0.91 0.86 0.93 0.95..., bob 0.11 0.23 0.83 0.91 0.93...),
# so the last 50 are well inside the plateau; more would only cost CI time. The
# job template's cosine takes the job's length (fsdp's total_steps is left
# null), so the learning rate is annealed by the final evaluation as in the
# shipped 350-step recipe.
STEPS = 2000 if ISOLATION else int(os.environ.get("SERVICE_E2E_STEPS", "200"))
# LEARNED: what "the agent learned" means here. Both tasks start near 0.1 and
# reach 0.94-0.95 (last 50 steps) and 1.0 greedy. A known limit of the LoRA
# recipe on bob's "digit before D" task (docs/algorithms.md, "Digit before D")
# is that one question can lock onto a wrong answer for the rest of the run;
# the lr warm-up makes it rarer, not impossible (CI of 2026-11-29: bob 0.839 and
# 0.889). One locked question costs about 0.055 of the mean and 4 of the 36
# evaluation items (0.889); two cost about 0.11 and 8 items (0.778). So the
# bounds pass one locked question and fail two, and fail any agent that did
# not learn: this test is about the service, the recipe has its own tests.
LEARNED_MEAN = 0.8
LEARNED_EVAL = 0.85
agent_js = f"{src}/examples/quickstart_agent/agent.mjs"
problems = []
START = time.time()
LIMIT = 1380  # seconds: under ctest's TIMEOUT (1500), so that a slow run ends here, saying where and why


def elapsed():
    return f"[{time.time() - START:.0f} s]"


def in_time(what):
    """Fails the test, with its logs, once it has run LIMIT seconds."""
    assert time.time() - START < LIMIT, f"{what} within {LIMIT} s of the start"


def expect(cond, what):
    if not cond:
        problems.append(what)
        print("FAIL:", what, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
ADMIN = "operator-secret-0123456789"


def call(method, path, key=None, body=None, raw=False):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method)
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            text = r.read().decode()
            return r.status, (text if raw else json.loads(text or "{}"))
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text


def cli(*args):
    return subprocess.run([host, "tenants", "--config", f"{work}/service.yaml", *args], check=True, capture_output=True, text=True).stdout.strip()


# --- The deployment: a job template on WORK/model and the service file.
with open(f"{work}/job.yaml", "w") as f:
    f.write(f"""extends: {src}/configs/service_job_quickstart.yaml
inference: {{model_path: {work}/model}}
gateway: {{tokenizer: {work}/model, session_timeout_seconds: 10}}  # sessions whose agent call died with the service end
train: {{model_path: {work}/model}}  # the template's cosine follows each job's trainer.total_steps (fsdp's total_steps is null)
""")
with open(f"{work}/service.yaml", "w") as f:
    f.write(f"""service:
  port: {PORT}
  state_dir: {work}/state
  admin_api_key: {ADMIN}
  checkpoint_every: 20
  models:
    digits: {{config: {work}/job.yaml}}
  evaluations:
    digit_after: {{agent_command: node {agent_js} --eval, dataset: {src}/configs/data/quickstart_eval.jsonl}}
    digit_before: {{agent_command: node {agent_js} --eval --task before, dataset: {src}/configs/data/quickstart_before_eval.jsonl}}
  hyperparameters:
    trainer.total_steps: {{min: 1, max: 2000}}
    experiment.seed: {{min: 0, max: 1000}}
  quotas: {{max_active_jobs: 1, max_open_sessions: {1 if ISOLATION else 400}, max_tokens: {1000 if ISOLATION else 0}}}
""")
cli("add-user", "alice")
cli("add-user", "bob")
key = {"alice": cli("create-key", "alice"), "bob": cli("create-key", "bob")}
spare = json.loads(cli("create-key", "alice", "--json"))

service = None


def start_service(log_name):
    global service
    service = subprocess.Popen([host, "service", "--config", f"{work}/service.yaml"], stderr=open(f"{work}/{log_name}", "w"),
                               stdout=subprocess.DEVNULL, start_new_session=True)
    for _ in range(600):
        try:
            if call("GET", "/health")[0] == 200:
                return
        except OSError:
            pass
        if service.poll() is not None:
            sys.exit(f"the service exited: {open(f'{work}/{log_name}').read()[-3000:]}")
        time.sleep(0.1)
    sys.exit("the service did not answer /health")


agents = []
try:
    start_service("service1.log")
    # --- Operator and users.
    expect(call("GET", "/admin/users", key["alice"])[0] == 403, "a user key reached /admin/users")
    st, users = call("GET", "/admin/users", ADMIN)
    expect(st == 200 and [u["name"] for u in users["data"]] == ["alice", "bob"], f"/admin/users: {st} {users}")
    expect(call("GET", "/v1/jobs", spare["key"])[0] == 200, "the spare key does not work")
    expect(call("DELETE", f"/admin/keys/{spare['id']}", ADMIN)[0] == 200, "revoking a key failed")
    expect(call("GET", "/v1/jobs", spare["key"])[0] == 401, "a revoked key still works")
    expect(call("GET", "/v1/jobs")[0] == 401, "no key was accepted")

    jobs = {}
    for user, exp, ev in (("alice", "after", "digit_after"), ("bob", "before", "digit_before")):
        st, j = call("POST", "/v1/jobs", key[user], {"base_model": "digits", "experiment": exp, "trial": "t1", "evaluation": ev,
                                                     "hyperparameters": {"trainer.total_steps": STEPS, "experiment.seed": 7}})
        assert st == 201, f"{user}'s job: {st} {j}"
        jobs[user] = j
        print(f"{user}: job {j['id']} ({j['model']}), base URL {j['base_url']}", flush=True)
    a, b = jobs["alice"]["id"], jobs["bob"]["id"]
    st, body = call("POST", "/v1/jobs", key["alice"], {"base_model": "digits", "experiment": "after", "trial": "t2"})
    expect(st == 429 and "quota" in body["error"]["message"].lower(), f"a second job over the quota: {st} {body}")
    st, body = call("POST", "/v1/jobs", key["bob"], {"base_model": "digits", "experiment": "x", "hyperparameters": {"train.lr": 1.0}})
    expect(st == 400 and "not one this service lets jobs set" in body["error"]["message"], f"a hyper-parameter outside the list: {st} {body}")
    st, body = call("POST", "/v1/jobs", key["bob"], {"base_model": "digits", "experiment": "x", "hyperparameters": {"trainer.total_steps": 99999}})
    expect(st == 400 and "at most" in body["error"]["message"], f"a hyper-parameter over its limit: {st} {body}")
    st, body = call("POST", "/v1/jobs", key["bob"], {"base_model": "gpt-5", "experiment": "x"})
    expect(st == 400 and "digits" in body["error"]["message"], f"an unknown base model: {st} {body}")

    for user, task in () if ISOLATION else (("alice", "after"), ("bob", "before")):
        env = dict(os.environ, AREAL_GATEWAY_URL=f"{URL}{jobs[user]['base_url']}", AREAL_ADMIN_KEY=key[user])
        agents.append(subprocess.Popen(["node", agent_js, "--concurrency", "9", "--group-size", "16", "--task", task],
                                       env=env, stdout=open(f"{work}/agent_{user}.log", "w"), stderr=subprocess.STDOUT))

    def run_dir(user, exp):
        return f"{work}/state/users/{user}/{exp}/t1"

    def steps_done(user, exp):
        try:
            return sum(1 for l in open(f"{run_dir(user, exp)}/metrics.jsonl") if '"eval":true' not in l)
        except FileNotFoundError:
            return 0

    deadline = time.time() + 600
    while not ISOLATION and (steps_done("alice", "after") < 5 or steps_done("bob", "before") < 5):
        assert time.time() < deadline, "the jobs did not train 5 steps"
        in_time("the jobs did not train 5 steps")
        assert service.poll() is None, "the service died"
        time.sleep(0.5)

    # --- Isolation: a session of each user's own, then every route with the other's credentials.
    sessions = {}
    for user in ("alice", "bob"):
        base = jobs[user]["base_url"]
        for _ in range(300):
            st, s = call("POST", f"{base}/rl/start_session", key[user], {"task_id": f"probe-{user}", "group_id": "probe"})
            if st != 429:
                break
            time.sleep(0.1)
        assert st == 200, f"{user}'s probe session: {st} {s}"
        st, c = call("POST", f"{base}/v1/chat/completions", s["api_key"], {"model": "x", "messages": [{"role": "user", "content": "Which digit comes after 3?"}], "max_tokens": 2})
        expect(st == 200, f"{user}'s probe call: {st} {c}")
        sessions[user] = s
    if ISOLATION:  # quotas: one open session each
        st, q = call("POST", f"{jobs['alice']['base_url']}/rl/start_session", key["alice"], {"task_id": "second"})
        expect(st == 429 and "Session quota" in q["error"]["message"], f"a session over the open-session quota: {st} {q}")
    ba, bb = jobs["alice"]["base_url"], jobs["bob"]["base_url"]
    sa, sb = sessions["alice"], sessions["bob"]
    chat = {"model": "after/t1", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    cross = [  # bob (his key, or his session's key) at everything of alice's
        ("GET", f"/v1/jobs/{a}", key["bob"], None), ("POST", f"/v1/jobs/{a}/pause", key["bob"], {}),
        ("POST", f"/v1/jobs/{a}/resume", key["bob"], {}), ("POST", f"/v1/jobs/{a}/cancel", key["bob"], {}),
        ("GET", f"/v1/jobs/{a}/metrics", key["bob"], None), ("GET", f"/v1/jobs/{a}/sessions", key["bob"], None),
        ("GET", f"/v1/jobs/{a}/reward_curve.svg", key["bob"], None), ("POST", f"/v1/jobs/{a}/dashboard", key["bob"], {}),
        ("POST", f"/v1/jobs/{a}/export_trajectories", key["bob"], {"session_id": sa["session_id"]}),
        ("POST", f"/v1/jobs/{b}/export_trajectories", key["bob"], {"session_id": sa["session_id"]}),
        ("POST", f"{ba}/rl/start_session", key["bob"], {"task_id": "x"}), ("POST", f"{ba}/v1/rl/start_session", key["bob"], {"task_id": "x"}),
        ("POST", f"{ba}/v1/chat/completions", key["bob"], chat), ("POST", f"{ba}/chat/completions", key["bob"], chat),
        ("POST", f"{ba}/v1/messages", key["bob"], {"model": "x", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}),
        ("POST", f"{ba}/v1/responses", key["bob"], {"model": "x", "input": "hi"}),
        ("POST", f"{ba}/export_trajectories", key["bob"], {"session_id": sa["session_id"]}),
        ("GET", f"{ba}/v1/models", key["bob"], None), ("GET", f"{ba}/health", key["bob"], None),
        ("POST", f"{ba}/v1/chat/completions", sb["api_key"], chat), ("POST", f"{ba}/rl/set_reward", sb["api_key"], {"reward": 1}),
        ("POST", f"{ba}/rl/end_session", sb["api_key"], {}), ("POST", f"{ba}/{sb['api_key']}/v1/chat/completions", None, chat),
        ("POST", "/v1/chat/completions", key["bob"], chat), ("POST", "/chat/completions", key["bob"], chat),
        ("POST", "/v1/messages", key["bob"], {"model": "after/t1", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}),
        ("POST", "/v1/responses", key["bob"], {"model": "after/t1", "input": "hi"}),
        ("POST", "/rl/start_session", key["bob"], {"task_id": "x", "job": a}),
        ("POST", "/generate", key["bob"], {"model": "after/t1", "input_ids": [1, 2, 3]}),
        ("POST", f"{ba}/generate", key["bob"], {"input_ids": [1, 2, 3]}), ("POST", f"{ba}/generate", sb["api_key"], {"input_ids": [1, 2, 3]}),
        ("GET", "/admin/users", key["bob"], None), ("GET", "/admin/jobs", key["bob"], None), ("POST", "/admin/users/bob/keys", key["bob"], {}),
        ("GET", "/metrics", key["bob"], None),
    ]
    for method, path, k, body in cross:
        st, ans = call(method, path, k, body)
        expect(st in (401, 403, 404), f"bob reached {method} {path}: {st} {str(ans)[:200]}")
    own = [  # the same routes answer their owner (so the refusals above are about the credential)
        ("GET", f"/v1/jobs/{a}", None), ("GET", f"/v1/jobs/{a}/metrics", None), ("GET", f"/v1/jobs/{a}/sessions", None),
        ("POST", f"{ba}/v1/chat/completions", chat), ("POST", "/v1/chat/completions", chat),
        ("POST", "/v1/messages", {"model": "after/t1", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}),
        ("GET", f"{ba}/v1/models", None)]
    own += [("POST", f"{ba}/{sa['api_key']}/v1/chat/completions", chat),  # a session-scoped URL, whatever key the SDK sends
            ("POST", f"/{sa['api_key']}/v1/chat/completions", chat)]
    for method, path, body in own:
        st, ans = call(method, path, key["alice"], body)
        expect(st == 200, f"alice could not reach her own {method} {path}: {st} {str(ans)[:200]}")
    # The dashboard of a job for a browser: a link made with the owner's key is the credential.
    st, link = call("POST", f"/v1/jobs/{a}/dashboard", key["alice"], {})
    expect(st == 201 and link["url"].startswith("/dashboard/"), f"alice's dashboard link: {st} {link}")
    st, page = call("GET", link["url"], raw=True)
    expect(st == 200 and "<html" in page.lower(), f"the dashboard page: {st} {str(page)[:200]}")
    st, rows = call("GET", link["url"] + "api/metrics?offset=0")
    expect(st == 200 and "rows" in rows, f"the dashboard's metrics: {st} {str(rows)[:200]}")
    st, run = call("GET", link["url"] + "api/run")
    expect(st == 200 and run.get("name") == "after / t1", f"the dashboard's run: {st} {run}")
    expect(call("GET", "/dashboard/not-a-link/")[0] == 404, "a made-up dashboard link answered")
    expect(call("GET", "/dashboard/%zz/")[0] == 400, "a malformed percent-escape is the client's mistake, not a 500")
    st, q = call("POST", f"{bb}/rl/start_session", key["bob"], {"task_id": "steal", "api_key": sa["api_key"]})
    expect(st == 409, f"bob started a session with alice's session key as his: {st} {q}")
    # A chosen key is a URL segment too: one naming a route (or too short to
    # be a key) is refused, and claims nothing, so bob's calls on that route
    # still reach his own job.
    for squat in ("messages", "models", "export_trajectories", "short"):
        st, q = call("POST", f"{ba}/rl/start_session", key["alice"], {"task_id": "squat", "api_key": squat})
        expect(st == 400, f"alice chose the session key {squat!r}: {st} {q}")
    st, q = call("POST", "/messages/count_tokens", key["bob"], {"model": f"{jobs['bob']['experiment']}/{jobs['bob']['trial']}",
                                                             "messages": [{"role": "user", "content": "hi"}]})
    expect(st == 200 and "input_tokens" in q, f"bob's count_tokens after alice's squat attempts: {st} {q}")
    # Errors on Anthropic routes keep Anthropic's shape behind a job's base URL and with a query.
    st, q = call("POST", f"{ba}/v1/messages?beta=true", "sk-not-a-key", {"model": "x", "messages": [], "max_tokens": 1})
    expect(st == 401 and q.get("type") == "error" and "error" in q, f"an Anthropic route's error shape: {st} {q}")
    st, q = call("GET", f"{ba}/metrics", key["alice"])
    expect(st == 403, f"the process's /metrics through a job's base URL: {st}")
    st, listed = call("GET", "/v1/jobs", key["bob"])
    expect(st == 200 and [j["id"] for j in listed["data"]] == [b], f"bob's job list: {listed}")
    st, models = call("GET", "/v1/models", key["bob"])
    expect("after/t1" not in [m["id"] for m in models["data"]] and "before/t1" in [m["id"] for m in models["data"]], f"bob's models: {models}")
    # Their own: the export route reaches the owner's session (still open: 409
    # says so; once ended, the trainer takes it), then it ends, rewarded.
    for user in ("alice", "bob"):
        s, base = sessions[user], jobs[user]["base_url"]
        st, ex = call("POST", f"/v1/jobs/{jobs[user]['id']}/export_trajectories", key[user], {"session_id": s["session_id"]})
        expect(st == 409 and "still active" in ex["error"]["message"], f"{user}'s export of her open session: {st} {str(ex)[:200]}")
        expect(call("POST", f"{base}/rl/set_reward", s["api_key"], {"reward": 0.0})[0] == 200, f"{user}'s reward")
        expect(call("POST", f"{base}/rl/end_session", s["api_key"], {})[0] == 200, f"{user}'s end_session")
    print(f"{elapsed()} isolation: {len(cross)} routes with the other user's credentials, all refused", flush=True)
    if ISOLATION:
        # The open-session quota (1) holds under concurrent starts too.
        raced = [None] * 6
        def start_one(i):
            raced[i] = call("POST", f"{ba}/rl/start_session", key["alice"], {"task_id": f"race{i}"})
        racers = [threading.Thread(target=start_one, args=(i,)) for i in range(len(raced))]
        for t in racers:
            t.start()
        for t in racers:
            t.join()
        started = [q for st, q in raced if st == 200]
        expect(len(started) <= 1 and all(st in (200, 429) for st, _ in raced), f"concurrent starts past the open-session quota: {raced}")
        for q in started:
            expect(call("POST", f"{ba}/rl/end_session", q["api_key"], {})[0] == 200, "ending the raced session")
        for user in ("alice", "bob"):
            jid = jobs[user]["id"]
            for action, state in (("pause", "paused"), ("resume", "running"), ("cancel", "cancelled")):
                st, j = call("POST", f"/v1/jobs/{jid}/{action}", key[user], {})
                expect(st == 200 and j["state"] == state, f"{user}'s {action}: {st} {j}")
            st, j = call("POST", f"/v1/jobs/{jid}/resume", key[user], {})
            expect(st == 409, f"{user} resumed a cancelled job: {st} {j}")
            st, j = call("POST", f"{jobs[user]['base_url']}/rl/start_session", key[user], {"task_id": "late"})
            expect(st == 409, f"a cancelled job took a session: {st} {j}")
            st, j = call("GET", f"/v1/jobs/{jid}", key[user])
            expect(st == 200 and j["state"] == "cancelled", f"{user}'s cancelled job: {st} {j}")
        st, j = call("POST", "/v1/jobs", key["bob"], {"base_model": "digits", "experiment": "before", "trial": "t2"})
        expect(st == 201, f"a job within the quota once the first was cancelled: {st} {j}")
        # alice's (cancelled) job "has trained" past the token quota: no more jobs for her.
        with open(f"{run_dir('alice', 'after')}/metrics.jsonl", "a") as f:
            f.write(json.dumps({"step": 0, "tokens": 5000, "note": "written by the test"}) + "\n")
        st, j = call("POST", "/v1/jobs", key["alice"], {"base_model": "digits", "experiment": "after", "trial": "t2"})
        expect(st == 429 and j["error"]["code"] == "quota_exceeded" and "Token quota" in j["error"]["message"], f"alice past her token quota: {st} {j}")
        # A restart whose service file no longer has bob's base model: his job
        # cannot start, says why, and he can still read and cancel it (it
        # would otherwise hold his quota of one active job for good).
        stuck = call("GET", "/v1/jobs", key["bob"])[1]["data"]
        stuck = [x for x in stuck if x["state"] in ("queued", "running", "paused")]
        expect(len(stuck) == 1, f"bob's active jobs before the restart: {stuck}")
        service.terminate()
        service.wait()
        text = open(f"{work}/service.yaml").read()
        open(f"{work}/service.yaml", "w").write(text.replace("    digits: {config:", "    digits_renamed: {config:"))
        start_service("service_renamed.log")
        st, j = call("GET", f"/v1/jobs/{stuck[0]['id']}", key["bob"])
        expect(st == 200 and "could not start" in j.get("message", ""), f"bob's job that could not start: {st} {j}")
        st, j = call("POST", f"/v1/jobs/{stuck[0]['id']}/cancel", key["bob"], {})
        expect(st == 200 and j["state"] == "cancelled", f"cancelling bob's job that could not start: {st} {j}")
        st, j = call("POST", "/v1/jobs", key["bob"], {"base_model": "digits_renamed", "experiment": "before", "trial": "t3"})
        expect(st == 201, f"a job within the quota once the stuck one was cancelled: {st} {j}")

    if not ISOLATION:
        # --- kill -9 mid-training, then the same deployment again.
        while steps_done("alice", "after") < 50 or steps_done("bob", "before") < 30:
            assert time.time() < deadline + 600, "the jobs did not reach the kill point"
            in_time(f"the jobs did not reach the kill point (steps: alice {steps_done('alice', 'after')}, bob {steps_done('bob', 'before')})")
            time.sleep(0.2)
        os.killpg(service.pid, signal.SIGKILL)
        service.wait()
        ckpt = {}
        for user, exp in (("alice", "after"), ("bob", "before")):
            rd, kw = run_dir(user, exp), f"{work}/kill_{user}"
            os.makedirs(kw, exist_ok=True)
            subprocess.run(["/usr/bin/python3", f"{src}/tests/e2e/fault_kill9_training.py", "snapshot", f"{rd}/gateway_state/gateway_state.sqlite3",
                            f"{kw}/pending.json"], check=True)
            shutil.copy(f"{rd}/metrics.jsonl", f"{kw}/metrics_before_kill.jsonl")
            shutil.copy(f"{rd}/rollouts.jsonl", f"{kw}/rollouts_before_kill.jsonl")
            ckpt[user] = max(int(d[5:]) for d in os.listdir(f"{rd}/checkpoints") if os.path.exists(f"{rd}/checkpoints/{d}/host_state.json"))
            print(f"{elapsed()} killed the service: {user}'s job at step {steps_done(user, exp)}, newest checkpoint step {ckpt[user]}", flush=True)
        start_service("service2.log")
        st, listed = call("GET", "/admin/jobs", ADMIN)
        expect(sorted(j["id"] for j in listed["data"]) == sorted([a, b]), f"jobs after the restart: {listed}")

        final = {}
        while len(final) < 2:
            in_time(f"the jobs did not finish (steps: alice {steps_done('alice', 'after')}, bob {steps_done('bob', 'before')})")
            assert service.poll() is None, "the restarted service died"
            for user in ("alice", "bob"):
                st, j = call("GET", f"/v1/jobs/{jobs[user]['id']}", key[user])
                if j.get("state") in ("finished", "failed", "cancelled"):
                    final[user] = j
            time.sleep(1)
        for user, exp in (("alice", "after"), ("bob", "before")):
            j = final[user]
            expect(j["state"] == "finished", f"{user}'s job ended {j['state']}: {j.get('message')}")
            r = subprocess.run(["/usr/bin/python3", f"{src}/tests/e2e/fault_kill9_training.py", "check", run_dir(user, exp), f"{work}/kill_{user}",
                                str(STEPS), str(ckpt[user]), "2"], capture_output=True, text=True)
            print(f"{user}: {r.stdout.strip()}", flush=True)
            expect(r.returncode == 0, f"{user}'s job lost or repeated sessions across the kill: {r.stdout} {r.stderr}")
            st, m = call("GET", f"/v1/jobs/{jobs[user]['id']}/metrics", key[user])
            steps = [row for row in m["rows"] if not row.get("eval")]
            last50 = sum(row["reward_mean"] for row in steps[-50:]) / 50
            ev = j.get("last_evaluation", {}).get("eval_reward_mean", -1)
            first10 = sum(row["reward_mean"] for row in steps[:10]) / 10
            print(f"{elapsed()} {user}: {len(steps)} steps, first-10 mean reward {first10:.4f}, last-50 mean reward {last50:.4f}, final greedy evaluation {ev}", flush=True)
            expect(first10 <= LEARNED_MEAN - 0.3, f"{user}'s agent did not start from chance: first-10 mean reward {first10:.4f}")
            expect(last50 >= LEARNED_MEAN, f"{user}'s agent did not learn: last-50 mean reward {last50:.4f} < {LEARNED_MEAN}")
            expect(ev >= LEARNED_EVAL, f"{user}'s final evaluation {ev} < {LEARNED_EVAL}")
            expect(max(row["staleness_max"] for row in steps) <= 2, f"{user}'s job trained past its staleness bound")
            final[user]["eval"] = ev
        for p in agents:
            p.terminate()

        # --- Phase 3: the trained models by experiment/trial, through the OpenAI SDK (the agent's eval mode).
        for user, exp, task, data in (("alice", "after", "after", "quickstart_eval"), ("bob", "before", "before", "quickstart_before_eval")):
            env = dict(os.environ, AREAL_GATEWAY_URL=URL, AREAL_API_KEY=key[user], AREAL_EVAL_DATASET=f"{src}/configs/data/{data}.jsonl")
            env.pop("AREAL_ADMIN_KEY", None)
            out = subprocess.run(["node", agent_js, "--eval", "--task", task, "--model", f"{exp}/t1"], env=env, capture_output=True, text=True, timeout=300)
            expect(out.returncode == 0, f"{user}'s Phase 3 evaluation failed: {out.stderr[-500:]}")
            result = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}
            print(f"{user}: Phase 3 '{exp}/t1' scores {result.get('reward_mean')} (the job's final evaluation: {final[user]['eval']})", flush=True)
            missed = [json.loads(line[5:]) for line in out.stdout.splitlines() if line.startswith("item ")]
            for item in (i for i in missed if i["reward"] < 1):  # names a locked question in the log (LEARNED)
                print(f"{user}: missed {item['question']!r}: answered {item['reply']!r}, expected {item['answer']!r}", flush=True)
            expect(result.get("reward_mean") == final[user]["eval"], f"{user}'s model by experiment/trial scores {result.get('reward_mean')}, "
                                                                      f"its job's final evaluation {final[user]['eval']}")
            # The seeds' Phase 3 engine call: SGLang's /generate on the chat prompt's ids, greedy, against the chat route's answer.
            for d in range(1, 9):
                q = f"Which digit comes {task} {d}?"
                with open(f"{work}/q.json", "w") as f:
                    json.dump({"messages": [{"role": "user", "content": q}]}, f)
                ids = json.loads(subprocess.run([host, "tokenize", "--tokenizer", f"{work}/model", "--chat", f"{work}/q.json"], stdin=subprocess.DEVNULL,
                                                capture_output=True, text=True, check=True).stdout)["ids"]
                st, g = call("POST", "/generate", key[user], {"model": f"{exp}/t1", "input_ids": ids, "sampling_params": {"temperature": 0, "max_new_tokens": 4}})
                st2, c = call("POST", "/v1/chat/completions", key[user], {"model": f"{exp}/t1", "messages": [{"role": "user", "content": q}],
                                                                         "temperature": 0, "max_tokens": 4})
                expect(st == 200 and st2 == 200 and g["text"] == c["choices"][0]["message"]["content"],
                       f"{user}'s /generate and chat answers differ for {q!r}: {st} {g} / {st2} {c}")
            print(f"{user}: /generate (SGLang's route, by experiment/trial) answers as the chat route does", flush=True)
        st, ans = call("POST", "/v1/chat/completions", key["alice"], {"model": "before/t1", "messages": [{"role": "user", "content": "hi"}]})
        expect(st == 404, f"alice reached bob's model: {st}")
        st, ans = call("POST", "/v1/chat/completions", key["bob"], {"model": "after/t1", "messages": [{"role": "user", "content": "hi"}]})
        expect(st == 404, f"bob reached alice's model: {st}")
except BaseException as e:
    print(f"{elapsed()} stopped: {e!r}", flush=True)
    for name in ("service1.log", "service2.log", "agent_alice.log", "agent_bob.log"):
        if os.path.exists(f"{work}/{name}"):
            print(f"--- the end of {name}:\n" + "".join(open(f"{work}/{name}", errors="replace").readlines()[-25:]), flush=True)
    raise
finally:
    for p in agents:
        p.kill()
    if service and service.poll() is None:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(service.pid, signal.SIGKILL)

if problems:
    print(f"{len(problems)} problem(s)")
    sys.exit(1)
print("OK")
