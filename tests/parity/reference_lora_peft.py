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
  reference_lora_peft.py ref COMMAND ...
      one of reference_logprobs_transformers.py's commands
  reference_lora_peft.py batch < COMMANDS
      each line of standard input one of the commands above (without the
      script's name, shell-quoted), run in order in one process
"""
import json
import sys

import torch

import reference_logprobs_transformers as reference  # beside this file


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

    out = reference.sequence_logprobs(PeftModel.from_pretrained(base(model_dir), adapter_dir), path_in)
    with open(path_out, "w") as f:
        json.dump({"logprobs": out, "peft": __import__("peft").__version__}, f)


def run(argv):
    """One command line of this script; `ref ...` is one of
    reference_logprobs_transformers.py's, run here."""
    cmd = argv[0]
    if cmd == "make":
        make(argv[1], argv[2], int(argv[3]), int(argv[4]), float(argv[5]), argv[6], argv[7] == "1")
    elif cmd == "score":
        score(argv[1], argv[2], argv[3], argv[4])
    elif cmd == "ref":
        reference.run(argv[1:])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    if sys.argv[1] == "batch":
        reference.batch(sys.stdin, run)
    else:
        run(sys.argv[1:])
