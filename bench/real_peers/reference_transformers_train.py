"""Training reference for bench/real_peers/run.sh: Hugging Face transformers'
own model class (from_pretrained on our folder, fp32, eager attention) with
torch.optim.AdamW and clip_grad_norm_, the loop Python RL frameworks run on
CPU. Same token ids as bench/model (token(seq, pos)), same loss (mean NLL of
every next token), same optimizer settings as areal_model_bench.

    reference_transformers_train.py MODEL_DIR THREADS BATCH SEQLEN STEPS

Prints one JSON object: impl, first_loss, train_tokens_per_s, train_step_s."""
import json
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM


def token(seq, pos, vocab):
    return (seq * 7919 + pos * 104729 + 13) % vocab


def main():
    model_dir = sys.argv[1]
    threads, batch, seqlen, steps = map(int, sys.argv[2:6])
    torch.set_num_threads(threads)
    m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    m.train()
    vocab = m.config.vocab_size
    ids = torch.tensor([[token(s, t, vocab) for t in range(seqlen)] for s in range(batch)])
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, weight_decay=0.0)

    def step():
        opt.zero_grad()
        logits = m(input_ids=ids).logits
        lp = logits[:, :-1].float().log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        loss = -lp.mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss.item()

    out = {"impl": f"transformers {transformers.__version__} + torch {torch.__version__}", "threads": threads}
    out["first_loss"] = step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    secs = time.perf_counter() - t0
    out["train_tokens_per_s"] = steps * batch * seqlen / secs
    out["train_step_s"] = secs / steps
    print(json.dumps(out))


if __name__ == "__main__":
    main()
