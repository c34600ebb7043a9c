"""The log-probs the gateway recorded against the references' (see
serve_adapters.sh): at every sampled position, |recorded - reference| <=
BOUND; and adapter a's recording differs from the base's scoring of the
same tokens (the adapter really served them).
  compare_recorded.py WORK BOUND [SERVED...]   (default: a b base)
"""
import json
import sys

work, bound = sys.argv[1], float(sys.argv[2])
served_list = sys.argv[3:] or ["a", "b", "base"]


def worst(recorded_path, reference_path):
    rec = json.load(open(recorded_path))
    ref = json.load(open(reference_path))["logprobs"]  # ref[t - 1] = log p(ids[t] | ids[<t])
    diffs = [abs(lp[t] - r[t - 1]) for lp, mask, r in zip(rec["logprobs"], rec["loss_mask"], ref)
             for t in range(1, len(lp)) if mask[t]]
    assert diffs, f"{recorded_path}: no sampled positions"
    return len(diffs), max(diffs)


failed = 0
for served in served_list:
    n, d = worst(f"{work}/recorded-{served}.json", f"{work}/ref-{served}.json")
    ok = d <= bound
    failed += not ok
    print(f"{'ok' if ok else 'FAIL'} {served}: {n} sampled log-probs, max difference {d:.3g} from the reference (bound {bound})")
n, d = worst(f"{work}/recorded-a.json", f"{work}/ref-a-on-base.json")
ok = d > 1e-3
failed += not ok
print(f"{'ok' if ok else 'FAIL'} adapter a changes the model: its tokens under the base differ by up to {d:.3g}")
versions = {v for vs in json.load(open(f"{work}/recorded-a.json"))["versions"] for v in vs if v >= 0}
print(f"adapter a's tokens carry versions {sorted(versions)}")
sys.exit(1 if failed else 0)
