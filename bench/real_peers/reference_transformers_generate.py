"""Generation reference for bench/model/moe.sh (beside the training
reference, whose token ids it shares): Hugging Face transformers'
own model class (from_pretrained on our folder, fp32, eager attention) and
its generate(): all requests in one batch, sampling at temperature 1, every
request running the full length (no end of turn), as areal_model_bench's
generation does. Same prompt ids as areal_model_bench (token(seq, pos)).

    reference_transformers_generate.py MODEL_DIR THREADS REQUESTS PROMPT NEW_TOKENS

Prints one JSON object: impl, gen_tokens_per_s, gen_s (timed after a
warm-up run of the same length)."""
import json
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM

from reference_transformers_train import token  # beside this file


def main():
    model_dir = sys.argv[1]
    threads, requests, prompt, new = map(int, sys.argv[2:6])
    torch.set_num_threads(threads)
    m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
    vocab = m.config.vocab_size
    ids = torch.tensor([[token(r, t, vocab) for t in range(prompt)] for r in range(requests)])

    def run():
        with torch.no_grad():
            out = m.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                             max_new_tokens=new, min_new_tokens=new, pad_token_id=0)
        return (out.shape[1] - prompt) * requests

    run()  # warm-up on the full length
    t0 = time.perf_counter()
    produced = run()
    secs = time.perf_counter() - t0
    print(json.dumps({"impl": f"transformers {transformers.__version__} + torch {torch.__version__}", "gen_tokens_per_s": produced / secs,
                      "gen_s": secs}))


if __name__ == "__main__":
    main()
