#!/usr/bin/python3
"""The python3-torch reference for bench/model/run.sh: the same decoder
(Qwen3 / Qwen2 / Llama 3 from config.json), written the way Python RL
frameworks run it eagerly: a padded-free [B, L] batch, HF-style RoPE,
torch.optim.AdamW, clip_grad_norm_, and a batched KV-cache decode loop.

    reference_model.py MODEL_DIR THREADS BATCH SEQLEN STEPS GEN_REQUESTS GEN_PROMPT GEN_TOKENS

Prints one JSON object with the fields areal_model_bench prints."""
import json
import math
import struct
import sys
import time

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    """A safetensors file: u64 header length, JSON header, raw little-endian data."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(raw[base + begin:base + end]), dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).float()
    return out


def token(seq, pos, vocab):
    return (seq * 7919 + pos * 104729 + 13) % vocab


class Decoder(torch.nn.Module):
    def __init__(self, model_dir):
        super().__init__()
        self.cfg = json.load(open(f"{model_dir}/config.json"))
        c = self.cfg
        self.h, self.kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or c["hidden_size"] // self.h
        self.eps = c["rms_norm_eps"]
        weights = read_safetensors(f"{model_dir}/model.safetensors")
        self.w = torch.nn.ParameterDict({k.replace(".", "__"): torch.nn.Parameter(v) for k, v in weights.items()})
        self.layers = c["num_hidden_layers"]
        self.qk_norm = "model__layers__0__self_attn__q_norm__weight" in self.w
        self.bias = "model__layers__0__self_attn__q_proj__bias" in self.w
        inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        self.register_buffer("inv_freq", inv, persistent=False)

    def p(self, name):
        return self.w[name.replace(".", "__")]

    def norm(self, x, name):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.p(name)

    def rope(self, x, pos):  # x [B, H, S, hd], pos [S]
        f = torch.outer(pos.float(), self.inv_freq)
        emb = torch.cat((f, f), -1)
        cos, sin = emb.cos(), emb.sin()
        x1, x2 = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return x * cos + torch.cat((-x2, x1), -1) * sin

    def lin(self, x, name):
        has_bias = self.bias and name.endswith(("q_proj", "k_proj", "v_proj"))  # Qwen2's qkv bias
        b = self.p(name + ".bias") if has_bias else None
        return torch.nn.functional.linear(x, self.p(name + ".weight"), b)

    def forward(self, ids, cache=None, offset=0):
        """ids [B, S]; cache: a list of (k, v) per layer, extended in place."""
        B, S = ids.shape
        pos = torch.arange(offset, offset + S)
        x = torch.nn.functional.embedding(ids, self.p("model.embed_tokens.weight"))
        for l in range(self.layers):
            pre = f"model.layers.{l}."
            h = self.norm(x, pre + "input_layernorm.weight")
            q = self.lin(h, pre + "self_attn.q_proj").view(B, S, self.h, self.hd).transpose(1, 2)
            k = self.lin(h, pre + "self_attn.k_proj").view(B, S, self.kv, self.hd).transpose(1, 2)
            v = self.lin(h, pre + "self_attn.v_proj").view(B, S, self.kv, self.hd).transpose(1, 2)
            if self.qk_norm:
                q = self.norm(q, pre + "self_attn.q_norm.weight")
                k = self.norm(k, pre + "self_attn.k_norm.weight")
            q, k = self.rope(q, pos), self.rope(k, pos)
            if cache is not None:
                if len(cache) > l:
                    k = torch.cat((cache[l][0], k), 2)
                    v = torch.cat((cache[l][1], v), 2)
                    cache[l] = (k, v)
                else:
                    cache.append((k, v))
            g = self.h // self.kv
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
            K = k.shape[2]
            mask = torch.arange(K)[None, :] > (torch.arange(S)[:, None] + offset)
            scores = scores.masked_fill(mask, float("-inf"))
            a = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, S, -1)
            x = x + self.lin(a, pre + "self_attn.o_proj")
            h = self.norm(x, pre + "post_attention_layernorm.weight")
            gate = self.lin(h, pre + "mlp.gate_proj")
            up = self.lin(h, pre + "mlp.up_proj")
            x = x + self.lin(torch.nn.functional.silu(gate) * up, pre + "mlp.down_proj")
        x = self.norm(x, "model.norm.weight")
        head = self.p("model.embed_tokens.weight") if self.cfg.get("tie_word_embeddings") else self.p("lm_head.weight")
        return torch.nn.functional.linear(x, head)


def time_training(step, steps, tokens_per_step):
    """One warm-up call of step() (its loss is the first loss), then `steps` timed ones."""
    out = {"first_loss": step()}
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    secs = time.perf_counter() - t0
    out["train_tokens_per_s"] = steps * tokens_per_step / secs
    out["train_step_s"] = secs / steps
    return out


def main():
    model_dir = sys.argv[1]
    threads, batch, seqlen, steps, gen_requests, gen_prompt, gen_tokens = map(int, sys.argv[2:9])
    torch.set_num_threads(threads)
    m = Decoder(model_dir)
    vocab = m.cfg["vocab_size"]
    out = {"impl": "python3-torch " + torch.__version__, "threads": threads}

    ids = torch.tensor([[token(s, t, vocab) for t in range(seqlen)] for s in range(batch)])
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, weight_decay=0.0)

    def step():
        opt.zero_grad()
        lp = m(ids)[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        loss = -lp.mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss.item()

    out.update(time_training(step, steps, batch * seqlen))

    gen = torch.Generator().manual_seed(0)

    @torch.no_grad()
    def run(tokens):
        prompt = torch.tensor([[token(r, t, vocab) for t in range(gen_prompt)] for r in range(gen_requests)])
        cache = []
        logits = m(prompt, cache, 0)[:, -1]
        produced = 0
        for i in range(tokens):
            nxt = torch.multinomial(logits.softmax(-1), 1, generator=gen)
            produced += nxt.numel()
            if i + 1 == tokens:
                break
            logits = m(nxt, cache, gen_prompt + i)[:, -1]
        return produced

    run(2)
    t0 = time.perf_counter()
    produced = run(gen_tokens)
    secs = time.perf_counter() - t0
    out["gen_tokens_per_s"] = produced / secs
    out["gen_s"] = secs
    print(json.dumps(out))


if __name__ == "__main__":
    main()
