"""An independent forward pass to check areal's decoder against
(plugins/torch_model): Qwen3, Qwen2/2.5 and Llama 3 written here from the
semantics of Hugging Face transformers' modeling code (eager attention,
float32) with Debian's python3-torch, reading the model folder's
config.json and model.safetensors directly. Shares no code with areal.

  /usr/bin/python3 hf_reference_logprobs.py MODEL_DIR IN.json OUT.json
IN: {"sequences": [[token ids], ...]}
OUT: {"logprobs": [[log p(ids[t] | ids[<t]) for t >= 1], ...]}
"""
import json
import math
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def load_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).to(torch.float32)
    return out


def rms_norm(x, w, eps):
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


def inv_frequencies(cfg, head_dim):
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        inv = torch.where(medium, smoothed, scaled)
    return inv


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward_logprobs(cfg, w, ids):
    family = cfg["model_type"]
    hidden = cfg["hidden_size"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or hidden // heads
    eps = cfg["rms_norm_eps"]
    seq = len(ids)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    positions = torch.arange(seq, dtype=torch.float32)
    freqs = positions[:, None] * inv_frequencies(cfg, head_dim)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    mask = torch.full((seq, seq), float("-inf")).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def proj(name, n):
            y = h @ w[p + f"self_attn.{name}_proj.weight"].T
            if p + f"self_attn.{name}_proj.bias" in w:  # Qwen2's q/k/v biases
                y = y + w[p + f"self_attn.{name}_proj.bias"]
            return y.view(seq, n, head_dim)

        q, k, v = proj("q", heads), proj("k", kv_heads), proj("v", kv_heads)
        if family == "qwen3":  # per-head RMSNorm of q and k, before RoPE
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = heads // kv_heads  # grouped-query attention
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("shd,thd->hst", q, k) * head_dim ** -0.5 + mask
        attn = torch.softmax(scores.float(), dim=-1)
        out = torch.einsum("hst,thd->shd", attn, v).reshape(seq, heads * head_dim)
        x = x + out @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    logp = torch.log_softmax(x @ head.T, dim=-1)
    return [float(logp[t - 1, ids[t]]) for t in range(1, seq)]


def main(model_dir, in_path, out_path):
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = load_safetensors(f"{model_dir}/model.safetensors")
    with torch.no_grad():
        out = [forward_logprobs(cfg, w, s) for s in json.load(open(in_path))["sequences"]]
    json.dump({"logprobs": out}, open(out_path, "w"))


if __name__ == "__main__":
    main(*sys.argv[1:])
