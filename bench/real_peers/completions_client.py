"""One load generator for both servers of bench/real_peers/run.sh: POSTs
vLLM's /v1/completions (token-id prompts, ignore_eos, temperature 1,
log-probs of the sampled token, not streamed) - the wire format areal's
vllm plugin speaks - and measures generated tokens per second.

    completions_client.py URL REQUESTS CONCURRENCY PROMPT_TOKENS NEW_TOKENS VOCAB

Prints one JSON object: tokens, seconds, tokens_per_s, mean request latency."""
import asyncio
import json
import sys
import time

import aiohttp


async def main():
    url, requests, concurrency, prompt_len, new_tokens, vocab = sys.argv[1], *map(int, sys.argv[2:7])
    prompts = [[(r * 7919 + t * 104729 + 13) % vocab for t in range(prompt_len)] for r in range(requests)]
    sem = asyncio.Semaphore(concurrency)
    latencies, produced, model = [], 0, None

    async def one(http, prompt, seed):
        nonlocal produced
        body = {"model": model, "prompt": prompt, "max_tokens": new_tokens, "ignore_eos": True, "temperature": 1.0,
                "top_p": 1.0, "logprobs": 0, "return_tokens_as_token_ids": True, "seed": seed}
        async with sem:
            t0 = time.perf_counter()
            async with http.post(url + "/v1/completions", json=body) as r:
                j = await r.json()
                if r.status != 200:
                    raise RuntimeError(f"{url}: {r.status} {j}")
            latencies.append(time.perf_counter() - t0)
            produced += len(j["choices"][0]["logprobs"]["tokens"])

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3600)) as http:
        async with http.get(url + "/v1/models") as r:
            model = (await r.json())["data"][0]["id"]  # the served name, as each server reports it
        await one(http, prompts[0], 0)  # warm-up
        latencies.clear()
        produced = 0
        t0 = time.perf_counter()
        await asyncio.gather(*(one(http, p, i) for i, p in enumerate(prompts)))
        secs = time.perf_counter() - t0
    print(json.dumps({"tokens": produced, "seconds": secs, "tokens_per_s": produced / secs,
                      "mean_latency_s": sum(latencies) / len(latencies)}))


asyncio.run(main())
