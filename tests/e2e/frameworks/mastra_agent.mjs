// Mastra's Agent (@mastra/core) runs its own tool loop. The model is Mastra's
// OpenAI-compatible config ({providerId, modelId, url, apiKey}): its model
// router then speaks Chat Completions. agent.stream() (Mastra's streaming run,
// consumed to its final text) makes each call a streamed one. prepareStep
// forces the first step (tool_choice "required"); later steps are "auto";
// maxSteps bounds the loop.
// Environment: AREAL_BASE_URL, AREAL_API_KEY, AREAL_FRAMEWORK_MODE (agent_frameworks.sh).
import { Agent } from "@mastra/core/agent";
import { createTool } from "@mastra/core/tools";
import { z } from "zod";

process.env.MASTRA_TELEMETRY_DISABLED = "1";  // offline: no usage reports
const runs = [];
const getWeather = createTool({
  id: "get_weather",
  description: "The weather in a city.",
  inputSchema: z.object({ city: z.string().max(24) }),
  execute: async (args) => {
    const output = `Sunny, 21 C in ${args.city}`;
    runs.push({ name: "get_weather", args, output });
    return output;
  },
});
const agent = new Agent({
  id: "weather-agent",
  name: "Weather agent",
  instructions: "You answer questions about the weather with the get_weather tool.",
  model: { providerId: "areal", modelId: "areal", url: `${process.env.AREAL_BASE_URL}/v1`, apiKey: process.env.AREAL_API_KEY },
  maxRetries: 0,
  tools: { get_weather: getWeather },
});
const result = await agent.stream("What is the weather in Paris?", {
  maxSteps: 4,
  prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: "required" } : undefined),
  modelSettings: { temperature: 0, maxOutputTokens: 64, maxRetries: 0 },
});
console.log(JSON.stringify({ forced: true, tool_runs: runs, answer: await result.text }));
