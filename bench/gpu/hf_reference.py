#!/usr/bin/env python3
"""Hugging Face transformers on the GPU, as the reference for
scripts/gpu_check.sh. Shares no code with areal: it loads the same HF folder
with transformers' own model classes.

  hf_reference.py logprobs MODEL_DIR IN.json OUT.json DTYPE
      IN {"sequences": [[ids]...]} -> OUT {"logprobs": [[log p(ids[t] | ids[<t]), t >= 1]...]}
      (each sequence alone, eager attention, log-softmax of float32 logits)
  hf_reference.py bench MODEL_DIR BATCH SEQLEN STEPS GEN_REQUESTS GEN_PROMPT GEN_TOKENS [VARIANTS]
      training tokens/s (forward + backward + clip + fused AdamW; float32
      master weights under bfloat16 autocast, as areal's mixed precision;
      STEPS 0 skips it) and generation tokens/s (model.generate in bfloat16,
      sampling, no early stop, timed after a warm-up run of the same length)
      for each of VARIANTS (comma-separated; default eager): eager (dynamic
      cache) and compiled (static cache + torch.compile, CUDA graphs), printed
      as one JSON object with the fields areal_model_bench prints
      (gen_tokens_per_s for eager, gen_tokens_per_s_compiled ...).
"""
import json
import os
import sys
import time
import traceback

import torch
import transformers
from transformers import AutoModelForCausalLM

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Where transformers runs: the GPU, or the CPU when gpu_check rehearses its
# plumbing there (GPU_CHECK_DEVICE=cpu sets this; its numbers mean nothing).
DEVICE = os.environ.get("AREAL_REFERENCE_DEVICE", "cuda")
ON_GPU = DEVICE.startswith("cuda")


def synchronize():
    if ON_GPU:
        torch.cuda.synchronize()


def reset_peak_memory():
    if ON_GPU:
        torch.cuda.reset_peak_memory_stats()


def peak_memory():
    return torch.cuda.max_memory_allocated() if ON_GPU else 0


def token(seq, pos, vocab):  # the same formula as bench/model/bench_model.cpp
    return (seq * 7919 + pos * 104729 + 13) % vocab


def load(model_dir, dtype, attn):
    try:
        m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation=attn)
    except TypeError:  # transformers before 4.56 names it torch_dtype
        m = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype, attn_implementation=attn)
    assert m.dtype == dtype, f"transformers loaded {m.dtype}, not {dtype}"
    return m.to(DEVICE)


@torch.no_grad()
def logprobs(model_dir, in_path, out_path, dtype):
    m = load(model_dir, DTYPES[dtype], "eager").eval()
    out = []
    for seq in json.load(open(in_path))["sequences"]:
        ids = torch.tensor([seq], device=DEVICE)
        logits = m(input_ids=ids).logits[0].float()
        lp = logits[:-1].log_softmax(-1).gather(-1, ids[0, 1:, None]).squeeze(-1)
        out.append(lp.tolist())
    json.dump({"logprobs": out, "impl": f"transformers {transformers.__version__} ({dtype}, eager)"}, open(out_path, "w"))


def lengths(batch, seqlen):
    """Each training row's length: seqlen, or with AREAL_BENCH_RAGGED=1 an RL-like
    ragged batch, seqlen * (s % 4 + 1) / 4 (bench_model.cpp's formula)."""
    if os.environ.get("AREAL_BENCH_RAGGED") == "1":
        return [max(2, seqlen * (s % 4 + 1) // 4) for s in range(batch)]
    return [seqlen] * batch


def bench(model_dir, batch, seqlen, steps, gen_requests, gen_prompt, gen_tokens, variants=("eager",)):
    out = {"impl": f"transformers {transformers.__version__} / torch {torch.__version__}"}
    m = load(model_dir, torch.float32, "sdpa")
    vocab = m.config.vocab_size
    if steps > 0:
        m.train()
        # A ragged batch is padded to its longest row, as a transformers
        # training loop batches it; the loss and tokens/s count real tokens.
        lens = lengths(batch, seqlen)
        longest = max(lens)
        ids = torch.tensor([[token(s, t, vocab) if t < n else 0 for t in range(longest)] for s, n in enumerate(lens)], device=DEVICE)
        mask = torch.tensor([[1 if t < n else 0 for t in range(longest)] for n in lens], device=DEVICE)
        # The strongest plain-PyTorch setup: fused AdamW (one kernel for every parameter).
        opt = torch.optim.AdamW(m.parameters(), lr=1e-5, weight_decay=0.0, fused=ON_GPU)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(DEVICE.split(":")[0], dtype=torch.bfloat16):
                logits = m(input_ids=ids, attention_mask=mask).logits
            lp = logits[:, :-1].float().log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
            real = mask[:, 1:].float()
            loss = -(lp * real).sum() / real.sum()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            out.setdefault("first_grad_norm", norm.item())  # before clipping, as areal reports it
            return loss.item()

        reset_peak_memory()
        out["first_loss"] = step()
        synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            out["last_loss"] = step()
        synchronize()
        secs = time.perf_counter() - t0
        out["train_tokens_per_s"] = steps * sum(lens) / secs
        out["train_tokens"] = sum(lens)
        out["train_step_s"] = secs / steps
        out["train_peak_device_memory_bytes"] = peak_memory()
        del opt
    m = m.to(torch.bfloat16).eval()
    for p in m.parameters():
        p.grad = None
    if ON_GPU:
        torch.cuda.empty_cache()
    prompt = torch.tensor([[token(r, t, vocab) for t in range(gen_prompt)] for r in range(gen_requests)], device=DEVICE)

    for variant in variants if gen_requests > 0 else ():
        kwargs = {}
        if variant == "compiled":
            # A static cache makes generate() compile the decoding forward
            # (torch.compile, mode reduce-overhead: CUDA graphs), as
            # transformers documents for fast generation.
            kwargs["cache_implementation"] = "static"
            try:
                from transformers import CompileConfig
                kwargs["compile_config"] = CompileConfig(fullgraph=True, dynamic=False, mode="reduce-overhead")
            except ImportError:
                pass

        @torch.no_grad()
        def run(tokens):
            g = m.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                           max_new_tokens=tokens, min_new_tokens=tokens, pad_token_id=0, **kwargs)
            return (g.shape[1] - gen_prompt) * g.shape[0]

        key = "" if variant == "eager" else "_" + variant
        reset_peak_memory()
        try:
            t0 = time.perf_counter()
            run(gen_tokens)  # warm-up on the full length (compiles the compiled variant)
            synchronize()
            warm = time.perf_counter() - t0
            t0 = time.perf_counter()
            produced = run(gen_tokens)
            synchronize()
            secs = time.perf_counter() - t0
        except Exception as e:  # a variant that fails (a compile error) loses its own numbers only
            traceback.print_exc()
            out["gen_error" + key] = f"{type(e).__name__}: {e}"[:500]
            continue
        out["gen_tokens_per_s" + key] = produced / secs
        out["gen_s" + key] = secs
        out["gen_warmup_s" + key] = warm
        out["gen_peak_device_memory_bytes" + key] = peak_memory()
    print(json.dumps(out))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "logprobs" and len(sys.argv) == 6:
        logprobs(*sys.argv[2:6])
    elif len(sys.argv) >= 2 and sys.argv[1] == "bench" and len(sys.argv) in (9, 10):
        variants = tuple(sys.argv[9].split(",")) if len(sys.argv) == 10 else ("eager",)
        bench(sys.argv[2], *map(int, sys.argv[3:9]), variants=variants)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
