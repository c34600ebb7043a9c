"""The LoRA reference for bench/model/lora.sh: Hugging Face transformers'
model class with a PEFT LoRA adapter, trained by torch.optim.AdamW on the
same batch as areal_model_bench (same token formula, mean token NLL,
gradient clipping at 1.0), one warm-up step then STEPS timed. Runs in
.venv-vllm (peft, transformers, torch pinned in
tests/python/vllm/requirements.lock). Prints one JSON line.

    reference_peft.py MODEL_DIR THREADS BATCH SEQLEN STEPS RANK ALPHA
"""
import json
import resource
import sys

import torch

from reference_model import time_training, token  # beside this file: the batch areal_model_bench trains on, and its timing


def main():
    model_dir = sys.argv[1]
    threads, batch, seqlen, steps, rank = map(int, sys.argv[2:7])
    alpha = float(sys.argv[7])
    torch.set_num_threads(threads)
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules="all-linear", lora_dropout=0.0))
    vocab = model.config.vocab_size
    ids = torch.tensor([[token(s, t, vocab) for t in range(seqlen)] for s in range(batch)])
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-5, weight_decay=0.0)

    def step():
        opt.zero_grad()
        logits = model(input_ids=ids).logits.float()
        lp = logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        loss = -lp.mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        return loss.item()

    out = {"impl": "peft " + __import__("peft").__version__ + " + torch " + torch.__version__, "threads": threads}
    out.update(time_training(step, steps, batch * seqlen))
    # Kept between steps: the trainable parameters and AdamW's two moments (float32 each).
    out["resident_state_bytes"] = 3 * sum(p.numel() * p.element_size() for p in trainable)
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))


if __name__ == "__main__":
    main()
