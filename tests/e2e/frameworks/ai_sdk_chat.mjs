// The Vercel AI SDK's own tool loop (generateText with a tool and a step
// bound) on Chat Completions, through @ai-sdk/openai-compatible: the provider
// the AI SDK documents for self-hosted OpenAI-compatible servers. prepareStep
// forces the first step (tool_choice "required"); later steps are "auto".
// Environment: AREAL_BASE_URL, AREAL_API_KEY, AREAL_FRAMEWORK_MODE (agent_frameworks.sh).
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, isStepCount, tool } from "ai";
import { z } from "zod";

const provider = createOpenAICompatible({
  name: "areal",
  baseURL: `${process.env.AREAL_BASE_URL}/v1`,
  apiKey: process.env.AREAL_API_KEY,
});
const runs = [];
const getWeather = tool({
  description: "The weather in a city.",
  inputSchema: z.object({ city: z.string().max(24) }),
  execute: async (args) => {
    const output = `Sunny, 21 C in ${args.city}`;
    runs.push({ name: "get_weather", args, output });
    return output;
  },
});
const result = await generateText({
  model: provider.chatModel("areal"),
  tools: { get_weather: getWeather },
  prompt: "What is the weather in Paris?",
  prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: "required" } : {}),
  stopWhen: isStepCount(4),
  temperature: 0,
  maxOutputTokens: 64,
  maxRetries: 0,
});
console.log(JSON.stringify({ forced: true, tool_runs: runs, answer: result.text }));
