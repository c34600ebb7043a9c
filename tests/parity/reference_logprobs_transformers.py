"""Hugging Face transformers as the independent reference for areal's
forward pass (issue #28): the model classes themselves (Qwen3, Qwen2,
Llama), loading our HF folders with from_pretrained, eager attention,
float32. Runs in .venv-vllm (transformers and torch 2.x, pinned in
tests/python/vllm/requirements.lock).

  reference_logprobs_transformers.py perturb MODEL_DIR SEED
      adds N(0, 0.05) noise to every tensor of MODEL_DIR/model.safetensors
      in place (norm weights then differ from 1, biases from 0, so every
      term of the forward counts)
  reference_logprobs_transformers.py sequences MODEL_DIR OUT.json SEED
      random token sequences over the model's vocabulary
  reference_logprobs_transformers.py score MODEL_DIR IN.json OUT.json
      IN: {"sequences": [[ids]]} -> OUT: {"logprobs": [[log p(ids[t] | ids[<t]), t >= 1]]};
      a mixture-of-experts model adds "experts" (each token's top-k experts per
      MoE layer, sorted) and "aux_loss" (transformers' load_balancing_loss_func
      of each sequence, as Qwen3MoeForCausalLM computes it)
"""
import json
import sys

import torch
from safetensors.torch import load_file, save_file


def perturb(model_dir, seed):
    path = f"{model_dir}/model.safetensors"
    tensors = load_file(path)
    g = torch.Generator().manual_seed(seed)
    for name in sorted(tensors):
        t = tensors[name]
        tensors[name] = (t.float() + 0.05 * torch.randn(t.shape, generator=g)).to(t.dtype).contiguous()
    save_file(tensors, path, metadata={"format": "pt"})


def sequences(model_dir, out, seed):
    vocab = json.load(open(f"{model_dir}/config.json"))["vocab_size"]
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(vocab, (n,), generator=g).tolist() for n in (2, 9, 23, 64, 130)]
    json.dump({"sequences": seqs}, open(out, "w"))


def score(model_dir, path_in, path_out):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    out = {"logprobs": sequence_logprobs(model, path_in), "transformers": __import__("transformers").__version__, "torch": torch.__version__}
    if getattr(model.config, "num_experts", 0):
        out.update(moe_routing(model, path_in))
    json.dump(out, open(path_out, "w"))


def moe_routing(model, path_in):
    """Each token's experts per MoE layer (top-k of the softmax of the router
    logits transformers returns) and transformers' own aux_loss."""
    k = model.config.num_experts_per_tok
    experts, aux = [], []
    with torch.no_grad():
        for seq in json.load(open(path_in))["sequences"]:
            out = model(input_ids=torch.tensor([seq]), output_router_logits=True)
            chosen = [torch.softmax(l.float(), -1).topk(k, -1).indices.sort(-1).values for l in out.router_logits]  # [T, k] per layer
            experts.append(torch.stack(chosen, 1).tolist())
            aux.append(float(out.aux_loss))
    return {"experts": experts, "aux_loss": aux}


def sequence_logprobs(model, path_in):
    """log p(ids[t] | ids[<t]), t >= 1, of each sequence of IN.json under a causal LM (eval mode, no grad)."""
    model.eval()
    out = []
    with torch.no_grad():
        for seq in json.load(open(path_in))["sequences"]:
            ids = torch.tensor([seq])
            logits = model(input_ids=ids).logits[0].float()
            lp = torch.log_softmax(logits[:-1], dim=-1).gather(1, ids[0, 1:, None])[:, 0]
            out.append(lp.double().tolist())
    return out


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "perturb":
        perturb(sys.argv[2], int(sys.argv[3]))
    elif cmd == "sequences":
        sequences(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "score":
        score(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"unknown command {cmd}")
