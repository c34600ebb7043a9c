"""Hugging Face PEFT as the independent reference for areal's LoRA adapters
(issue #34): PEFT makes an adapter folder with random A and B (so every
adapted projection counts), scores token sequences through PeftModel on the
transformers model class, and reads adapter folders areal wrote. Runs in
.venv-vllm (peft, transformers and torch pinned in
tests/python/vllm/requirements.lock).

  reference_lora_peft.py make MODEL_DIR ADAPTER_OUT SEED RANK ALPHA TARGETS RSLORA
      TARGETS: "all-linear" or a comma-separated list of module names;
      RSLORA: 0 or 1
  reference_lora_peft.py score MODEL_DIR ADAPTER_DIR IN.json OUT.json
      IN: {"sequences": [[ids]]} -> OUT: {"logprobs": [[log p(ids[t] | ids[<t]), t >= 1]]}
"""
import json
import sys

import torch


def base(model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")


def make(model_dir, out, seed, rank, alpha, targets, rslora):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, use_rslora=rslora, task_type="CAUSAL_LM",
                        target_modules=targets if targets == "all-linear" else targets.split(","),
                        init_lora_weights=False)  # A and B random: the adapter changes every targeted projection
    model = get_peft_model(base(model_dir), config)
    model.save_pretrained(out)


def score(model_dir, adapter_dir, path_in, path_out):
    from peft import PeftModel

    from reference_logprobs_transformers import sequence_logprobs  # beside this file

    out = sequence_logprobs(PeftModel.from_pretrained(base(model_dir), adapter_dir), path_in)
    json.dump({"logprobs": out, "peft": __import__("peft").__version__}, open(path_out, "w"))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), sys.argv[7], sys.argv[8] == "1")
    elif cmd == "score":
        score(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        sys.exit(f"unknown command {cmd}")
