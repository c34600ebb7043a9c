"""The reference for optimizer_reference_test.cpp: torch.optim.AdamW and
torch.nn.utils.clip_grad_norm_ (Debian's python3-torch) over the same
parameters, gradients and learning rates; shares no code with areal's
ShardedAdamW.

  /usr/bin/python3 optimizer_reference.py IN.json OUT.json
IN: {"params": [...], "grads": [[...] per step], "lrs": [...], "beta1", "beta2",
     "eps", "weight_decay", "max_norm" (0: no clipping)}
OUT: {"params": [[...] after each step], "norms": [global norm before clipping, per step]}
"""
import json
import sys

import torch

cfg = json.load(open(sys.argv[1]))
p = torch.nn.Parameter(torch.tensor(cfg["params"], dtype=torch.float32))
opt = torch.optim.AdamW([p], lr=cfg["lrs"][0], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"],
                        weight_decay=cfg["weight_decay"], foreach=False)
out = {"params": [], "norms": []}
for g, lr in zip(cfg["grads"], cfg["lrs"]):
    p.grad = torch.tensor(g, dtype=torch.float32)
    if cfg["max_norm"] > 0:
        out["norms"].append(float(torch.nn.utils.clip_grad_norm_([p], cfg["max_norm"])))
    else:
        out["norms"].append(float(p.grad.norm()))
    for group in opt.param_groups:
        group["lr"] = lr
    opt.step()
    out["params"].append(p.detach().tolist())
json.dump(out, open(sys.argv[2], "w"))
