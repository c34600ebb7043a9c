"""AReaL 1.0.4's own OpenAI proxy server (areal.experimental.openai.proxy.
proxy_rollout_server) as one process in front of a stock vLLM server, for
bench/real_peers/proxy_vs_gateway.py. AReaL normally starts it from its
RolloutController (name_resolve, then /create_engine and /call initialize
over HTTP); this does the same set-up in process with AReaL's own classes:
RemotevLLMEngine (which generates through vLLM's /v1/completions with token
ids) and the proxy's FastAPI app, served by uvicorn.

    areal_proxy.py --vllm-url URL --model-dir DIR --port N --admin-key KEY [--chat-template-type hf|concat]

Differences from AReaL's deployment, all outside the measured path: session
capacity is pre-granted (AReaL's trainer calls /grant_capacity once per
session), and /v1/<route> is served as /<route> (AReaL's proxy has no /v1
prefix; the OpenAI SDK adds one)."""
import argparse
from urllib.parse import urlparse

import uvicorn
from areal.api.cli_args import AgentConfig, InferenceEngineConfig
from areal.engine.vllm_remote import RemotevLLMEngine
from areal.experimental.openai.proxy import proxy_rollout_server as proxy


class StripV1:
    """ASGI middleware: /v1/chat/completions -> /chat/completions."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/v1/") and scope["path"] != "/v1/messages":
            scope = dict(scope, path=scope["path"][3:])
            scope["raw_path"] = scope["path"].encode()
        await self.app(scope, receive, send)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-url", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--admin-key", required=True)
    ap.add_argument("--chat-template-type", default="hf", choices=["hf", "concat"],
                    help="AReaL's AgentConfig.chat_template_type: hf re-renders the conversation, concat extends the last call's ids")
    args = ap.parse_args()
    vllm = urlparse(args.vllm_url)
    config = InferenceEngineConfig(
        backend="vllm:d1",
        tokenizer_path=args.model_dir,
        request_retries=1,
        request_timeout=600.0,
        setup_timeout=120.0,
        agent=AgentConfig(agent_cls_path="areal.experimental.openai.proxy.online_agent._OnlineAgent",
                          admin_api_key=args.admin_key, tool_call_parser="qwen", reasoning_parser="qwen3",
                          chat_template_type=args.chat_template_type),
    )
    proxy._server_host, proxy._server_port = "127.0.0.1", args.port
    proxy._engine = RemotevLLMEngine(config)
    proxy._engine.initialize(addr=f"{vllm.hostname}:{vllm.port}")
    proxy._setup_openai_client()
    with proxy._lock:
        proxy._capacity = 10**9
    print(f"AReaL proxy listening at http://127.0.0.1:{args.port}", flush=True)
    try:
        uvicorn.run(StripV1(proxy.app), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
    finally:
        proxy.cleanup_engine()


if __name__ == "__main__":
    main()
