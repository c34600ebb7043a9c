"""Hugging Face transformers as the independent reference for areal's
forward pass (issue #28): the model classes themselves (Qwen3, Qwen2,
Llama, Qwen3-MoE, GPT-OSS), loading our HF folders with from_pretrained, eager attention,
float32. Runs in .venv-vllm (transformers and torch 2.x, pinned in
tests/python/vllm/requirements.lock).

  reference_logprobs_transformers.py perturb MODEL_DIR SEED
      adds N(0, 0.05) noise to every tensor of MODEL_DIR/model.safetensors
      in place (norm weights then differ from 1, biases from 0, so every
      term of the forward counts)
  reference_logprobs_transformers.py mxfp4 MODEL_DIR QUANTIZED_DIR
      GPT-OSS's experts in MXFP4 (see mxfp4 below): QUANTIZED_DIR for areal,
      MODEL_DIR dequantized by transformers for transformers
  reference_logprobs_transformers.py sequences MODEL_DIR OUT.json SEED
      random token sequences over the model's vocabulary
  reference_logprobs_transformers.py score MODEL_DIR IN.json OUT.json
      IN: {"sequences": [[ids]]} -> OUT: {"logprobs": [[log p(ids[t] | ids[<t]), t >= 1]]};
      a mixture-of-experts model adds "experts" (each token's top-k experts per
      MoE layer, sorted) and "aux_loss" (transformers' load_balancing_loss_func
      of each sequence, as Qwen3MoeForCausalLM and GptOssForCausalLM compute it)
  reference_logprobs_transformers.py batch < COMMANDS
      each line of standard input one of the commands above (without the
      script's name, shell-quoted), run in order in one process
"""
import json
import shlex
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


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def mxfp4(model_dir, quantized_dir):
    """GPT-OSS's expert matrices in OpenAI's MXFP4 format (as the release
    stores them), with our own encoder: each run of 32 values along the
    reduction dimension gets the power-of-two scale that brings its largest
    magnitude to 6 or below, each value the nearest e2m1 code (low nibble
    first). QUANTIZED_DIR gets the blocks and scales (and
    quantization_config); MODEL_DIR's matrices become transformers' own
    dequantization of them (convert_moe_packed_tensors), which is what HF
    computes with an MXFP4 checkpoint."""
    import math
    import os
    import shutil
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    shutil.copytree(model_dir, quantized_dir, dirs_exist_ok=True)
    tensors = load_file(f"{model_dir}/model.safetensors")
    quantized = {}
    magnitudes = torch.tensor(E2M1)
    for name, w in sorted(tensors.items()):
        if not (name.endswith("mlp.experts.gate_up_proj") or name.endswith("mlp.experts.down_proj")):
            quantized[name] = w
            continue
        e, cols, rows = w.shape                                   # x @ w[e]: [in, out]
        blocks32 = w.float().transpose(1, 2).reshape(e, rows, cols // 32, 32)
        amax = blocks32.abs().amax(-1).clamp_min(1e-30)
        exp = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
        scaled = blocks32 / torch.pow(2.0, exp).unsqueeze(-1)
        code = (scaled.abs().unsqueeze(-1) - magnitudes).abs().argmin(-1)
        code = code + 8 * (scaled < 0).long()
        packed = (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8).contiguous()   # [e, rows, cols/32, 16]
        scales = (exp + 127).to(torch.uint8).contiguous()
        quantized[name + "_blocks"], quantized[name + "_scales"] = packed, scales
        tensors[name] = convert_moe_packed_tensors(packed, scales, dtype=torch.float32).contiguous()
    os.remove(f"{quantized_dir}/model.safetensors")
    save_file(quantized, f"{quantized_dir}/model.safetensors", metadata={"format": "pt"})
    save_file(tensors, f"{model_dir}/model.safetensors", metadata={"format": "pt"})
    config = json.load(open(f"{quantized_dir}/config.json"))
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                                         "model.embed_tokens", "lm_head"]}
    with open(f"{quantized_dir}/config.json", "w") as f:  # closed before a later command reads it
        json.dump(config, f, indent=2)


def sequences(model_dir, out, seed):
    vocab = json.load(open(f"{model_dir}/config.json"))["vocab_size"]
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(vocab, (n,), generator=g).tolist() for n in (2, 9, 23, 64, 130)]
    with open(out, "w") as f:  # closed before a later command reads it
        json.dump({"sequences": seqs}, f)


def score(model_dir, path_in, path_out):
    from transformers import AutoModelForCausalLM

    kwargs = {}
    if json.load(open(f"{model_dir}/config.json"))["model_type"] == "gpt_oss":
        # The per-expert loop (not grouped_mm): the reference sums as it reads.
        kwargs["experts_implementation"] = "eager"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager", **kwargs)
    out = {"logprobs": sequence_logprobs(model, path_in), "transformers": __import__("transformers").__version__, "torch": torch.__version__}
    if getattr(model.config, "num_experts", 0):
        out.update(moe_routing(model, path_in))
    with open(path_out, "w") as f:
        json.dump(out, f)


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


def run(argv):
    """One command line of this script (its arguments after the script's name)."""
    cmd = argv[0]
    if cmd == "perturb":
        perturb(argv[1], int(argv[2]))
    elif cmd == "mxfp4":
        mxfp4(argv[1], argv[2])
    elif cmd == "sequences":
        sequences(argv[1], argv[2], int(argv[3]))
    elif cmd == "score":
        score(argv[1], argv[2], argv[3])
    else:
        sys.exit(f"unknown command {cmd}")


def batch(lines, run_line=run):
    """Each non-empty line, a shell-quoted command line, run in this process
    in order: one interpreter start (importing torch and transformers takes
    seconds) for a whole test's reference work."""
    for line in lines:
        if line.strip():
            try:
                run_line(shlex.split(line))
            except BaseException:
                print(f"batch: failed at: {line.strip()}", file=sys.stderr)
                raise


if __name__ == "__main__":
    if sys.argv[1] == "batch":
        batch(sys.stdin)
    else:
        run(sys.argv[1:])
