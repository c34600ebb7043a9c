// areal-host sft's pieces: chat lines as token rows (host/sft_dataset), and
// the SFT loop (core/trainer/sft_loop) over a real train plugin (the toy
// unigram fixture) and the real sft algorithm plugin.
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>

#include <gtest/gtest.h>

#include "core/hf/chat_template/chat_template.hpp"
#include "core/hf/model_files/byte_tokenizer.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_api.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/trainer/algorithm_loss.hpp"
#include "core/trainer/sft_loop.hpp"
#include "sft_dataset.hpp"
#include "tests/support/error_code.hpp"

namespace {

namespace fs = std::filesystem;
using J = nlohmann::ordered_json;

class SftDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("areal-sft-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    areal::model::write_byte_tokenizer(dir_.string());
    tok_ = areal::tokenizer::Tokenizer::from_dir(dir_.string());
    chat_ = std::make_unique<areal::jinja::ChatTemplate>(areal::jinja::ChatTemplate::from_tokenizer_config(tok_->config()));
  }
  void TearDown() override { fs::remove_all(dir_); }
  areal::trainer::SftExample example(const std::string& line) {
    return areal::host::sft_example(J::parse(line), *tok_, *chat_, J::object());
  }
  fs::path dir_;
  std::shared_ptr<const areal::tokenizer::Tokenizer> tok_;
  std::unique_ptr<areal::jinja::ChatTemplate> chat_;
};

TEST_F(SftDataset, ExampleIsThePromptAsRecordedThenTheReplyAndTheEndOfTurn) {
  const auto e = example(R"({"messages": [{"role": "user", "content": "Which digit comes after 3?"}, {"role": "assistant", "content": "4"}]})");
  const std::vector<int32_t> prompt(e.input_ids.begin(), e.input_ids.begin() + static_cast<std::ptrdiff_t>(e.prompt_tokens));
  EXPECT_EQ(tok_->decode(prompt), "<|im_start|>user\nWhich digit comes after 3?<|im_end|>\n<|im_start|>assistant\n");
  ASSERT_EQ(e.input_ids.size(), e.prompt_tokens + 2);
  EXPECT_EQ(e.input_ids[e.prompt_tokens], '4');
  EXPECT_EQ(e.input_ids.back(), tok_->token_to_id("<|im_end|>"));
}

TEST_F(SftDataset, SpecialTokenTextInAReplyStaysText) {
  const auto e = example(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "<|im_end|>"}]})");
  EXPECT_EQ(e.input_ids.size() - e.prompt_tokens, std::string("<|im_end|>").size() + 1);  // its bytes, then the real end of turn
}

// A reply's tool calls are trained as the model samples them, in the
// template's own syntax, not dropped (the model would learn to stop instead
// of calling); reasoning the template cannot render is refused, not dropped.
TEST_F(SftDataset, ToolCallsAreTrainedAsTheTemplateRendersThem) {
  auto completion = [&](const areal::trainer::SftExample& e) {
    return tok_->decode(std::vector<int32_t>(e.input_ids.begin() + static_cast<std::ptrdiff_t>(e.prompt_tokens), e.input_ids.end() - 1));
  };
  const auto call = example(R"({"messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": null,
      "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 1}}}]}]})");
  EXPECT_EQ(completion(call), R"(<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}</tool_call>)");
  EXPECT_EQ(call.input_ids.back(), tok_->token_to_id("<|im_end|>"));
  const auto both = example(R"({"messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "Let me add.",
      "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}}]}]})");
  EXPECT_EQ(completion(both), R"(Let me add.<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>)");
  try {
    example(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "4", "reasoning_content": "2+2"}]})");
    ADD_FAILURE() << "reasoning the template drops was accepted";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("reasoning_content"), std::string::npos) << e.what();
  }
}

TEST_F(SftDataset, RejectsLinesWithoutAReplyToTrain) {
  for (const char* bad : {R"({"text": "hi"})", R"({"messages": [{"role": "assistant", "content": "4"}]})",
                          R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})",
                          R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": [{"type": "text"}]}]})"}) {
    try {
      example(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const areal::Error& e) {
      EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT) << bad;
    }
  }
}

TEST_F(SftDataset, ErrorsNameTheFileAndLine) {
  const std::string path = (dir_ / "d.jsonl").string();
  std::ofstream(path) << R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})" << "\n\n"
                      << "{not json\n";
  try {
    areal::host::read_sft_dataset(path, *tok_, *chat_, J::object());
    FAIL() << "a bad line was accepted";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":3: not valid JSON"), std::string::npos) << e.what();
  }
  EXPECT_EQ(code_of([&] { areal::host::read_sft_dataset((dir_ / "none.jsonl").string(), *tok_, *chat_, J::object()); }),
            AREAL_CODE_NOT_FOUND);
}

// sft.max_length leaves out the examples longer than it (counted), as
// AReaL's datasets filter them; all of them too long is a clear error.
TEST_F(SftDataset, ExamplesOverMaxLengthAreLeftOutAndCounted) {
  const std::string path = (dir_ / "lengths.jsonl").string();
  std::ofstream(path) << R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})" << "\n"
                      << R"({"messages": [{"role": "user", "content": ")" << std::string(200, 'x') << R"("}, {"role": "assistant", "content": "b"}]})" << "\n";
  size_t dropped = 99;
  const auto all = areal::host::read_sft_dataset(path, *tok_, *chat_, J::object(), 0, &dropped);
  EXPECT_EQ(all.size(), 2u);
  EXPECT_EQ(dropped, 0u);
  const size_t short_len = all[0].input_ids.size();
  const auto kept = areal::host::read_sft_dataset(path, *tok_, *chat_, J::object(), short_len, &dropped);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].input_ids, all[0].input_ids);
  EXPECT_EQ(dropped, 1u);
  EXPECT_EQ(code_of([&] { areal::host::read_sft_dataset(path, *tok_, *chat_, J::object(), 3); }), AREAL_CODE_INVALID_ARGUMENT);
}

TEST(SftLoop, TrainsTheRepliesOnlyAndVisitsEveryExampleOncePerEpoch) {
  const fs::path run = fs::temp_directory_path() / ("areal-sft-loop-" + std::to_string(::getpid()));
  fs::remove_all(run);
  auto train_plugin = areal::PluginLoader::load_file(std::string(AREAL_TEST_FIXTURE_DIR) + "/libareal-fixture_toy_train.so");
  auto sft_plugin = areal::PluginLoader::load_file(std::string(AREAL_TEST_PLUGIN_DIR) + "/libareal-sft.so");
  std::string tn = "train", an = "algorithm";
  areal_services ts = areal::make_services(tn), as = areal::make_services(an);
  areal::PluginInstance train(train_plugin, R"({"vocab_size": 8, "lr": 0.5})", &ts);
  areal::PluginInstance algo(sft_plugin, "{}", &as);
  areal::trainer::StepPlugins p;
  p.train = train_plugin->train(), p.train_self = train.self();
  p.algorithm = sft_plugin->algorithm(), p.algorithm_self = algo.self();
  // Prompts of tokens 1 and 2 (never trained), replies of token 5 then 7.
  const std::vector<areal::trainer::SftExample> examples = {{{1, 2, 5, 7}, 2}, {{2, 1, 5, 7}, 2}, {{1, 1, 5, 7}, 2}};
  areal::trainer::SftOptions opt;
  opt.total_steps = 6, opt.batch_size = 3, opt.run_dir = run.string(), opt.save_final = false;
  const auto s = areal::trainer::run_sft(opt, p, examples);
  EXPECT_EQ(s.steps_run, 6);
  ASSERT_EQ(s.step_losses.size(), 6u);
  EXPECT_LT(s.step_losses.back(), s.step_losses.front());
  std::ifstream in(run / "metrics.jsonl");
  int64_t step = 0;
  for (std::string line; std::getline(in, line); ++step) {
    const auto row = nlohmann::json::parse(line);
    EXPECT_EQ(row["step"], step + 1);
    EXPECT_EQ(row["epoch"], step);         // batch_size = dataset size: one epoch per step
    EXPECT_EQ(row["rows"], 3);
    EXPECT_EQ(row["loss_tokens"], 6);      // 2 reply tokens per example; prompts not trained
  }
  EXPECT_EQ(step, 6);
  EXPECT_EQ(code_of([&] { areal::trainer::run_sft(opt, p, {}); }), AREAL_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of([&] { areal::trainer::run_sft(opt, p, {{{1, 2}, 2}}); }), AREAL_CODE_INVALID_ARGUMENT);
  fs::remove_all(run);
}

// The step's algo_nll is a mean over all its loss tokens, as the loss the
// train plugin optimises is: a micro-batch of one loss token weighs a
// quarter of one with four (it used to weigh as much).
TEST(SftLoss, MicroBatchesWeighByTheirLossTokens) {
  auto sft_plugin = areal::PluginLoader::load_file(std::string(AREAL_TEST_PLUGIN_DIR) + "/libareal-sft.so");
  std::string an = "algorithm";
  areal_services as = areal::make_services(an);
  areal::PluginInstance algo(sft_plugin, "{}", &as);
  areal::trainer::AlgorithmLoss loss(sft_plugin->algorithm(), algo.self());
  auto eval = [&](std::vector<int32_t> mask, std::vector<float> logprobs) {
    areal::HostTensor<int32_t> m(std::move(mask));
    areal::HostTensor<float> lp(std::move(logprobs)), grad(std::vector<float>(lp.values().size(), 0.0f));
    areal::TensorMapBuilder b;
    b.add("loss_mask", m.dl()).add("new_logprobs", lp.dl());
    double value = 0;
    areal::throw_if_status(loss.fn()->eval(loss.fn()->ctx, b.get(), &value, grad.dl(), nullptr), "loss");
    return value;
  };
  EXPECT_DOUBLE_EQ(eval({0, 1, 0, 0}, {-9.0f, -2.0f, -9.0f, -9.0f}), 2.0);
  EXPECT_DOUBLE_EQ(eval({1, 1, 1, 1}, {-1.0f, -1.0f, -1.0f, -1.0f}), 1.0);
  const nlohmann::json avg = loss.averages();
  EXPECT_DOUBLE_EQ(avg["nll"].get<double>(), (2.0 + 4 * 1.0) / 5) << avg.dump();
  EXPECT_DOUBLE_EQ(loss.sums()["tokens"].get<double>(), 5.0);
}

}  // namespace
