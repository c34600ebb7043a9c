// Scale-out's pieces without processes: scattering a packed batch over
// train ranks (host/train_ranks/batch_split), the channel's framing over a
// socket pair (rank_messages), and the sbatch script of `areal-host launch`
// (launcher/slurm_job).
#include <sys/socket.h>
#include <unistd.h>

#include <numeric>
#include <thread>
#include <cstdint>
#include <string>
#include <vector>
#include <stdexcept>

#include <gtest/gtest.h>

#include "core/config/run_config.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "launcher/shell.hpp"
#include "launcher/slurm_job.hpp"
#include "train_ranks/batch_split.hpp"
#include "train_ranks/rank_messages.hpp"

namespace {

using namespace areal::host;

template <class T>
std::vector<T> values_of(const ranks::OwnedTensor& t) {
  const T* p = reinterpret_cast<const T*>(t.bytes.data());
  return std::vector<T>(p, p + t.numel());
}

const ranks::OwnedTensor& named(const std::vector<ranks::OwnedTensor>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

TEST(BatchSplit, SlicesAreWholeSequencesBalancedByTokens) {
  // Sequences of 10, 2, 2, 2, 10, 4 tokens (30): two ranks get 14 and 16.
  const std::vector<int64_t> cu = {0, 10, 12, 14, 16, 26, 30};
  const auto s = areal::trainer::plan_slices(cu, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].first_sequence, 0);
  EXPECT_EQ(s[0].end_sequence, 4);
  EXPECT_EQ(s[1].end_sequence, 6);
  EXPECT_EQ(s[0].end_token, 16);
  // Every rank gets one sequence at least, even when tokens say otherwise.
  const auto t = areal::trainer::plan_slices({0, 100, 101, 102}, 3);
  for (size_t r = 0; r < 3; ++r) EXPECT_EQ(t[r].end_sequence - t[r].first_sequence, 1);
  EXPECT_THROW(areal::trainer::plan_slices({0, 5, 9}, 3), areal::Error);  // 2 sequences, 3 ranks
}

// Two GRPO groups of four rows: the cut nearest the token middle falls
// inside the first group and moves to the group boundary, which is within
// a quarter of a rank's share of the tokens.
TEST(BatchSplit, CutsMoveToWhereTheLeastPrefixIsShared) {
  // Group A: rows of 10, 10, 10, 10 tokens sharing 8; group B: 12, 12, 12, 12 sharing 9.
  const std::vector<int64_t> cu = {0, 10, 20, 30, 40, 52, 64, 76, 88};
  const std::vector<int64_t> shared = {0, 8, 8, 8, 0, 9, 9, 9};
  const auto plain = areal::trainer::plan_slices(cu, 2);
  EXPECT_EQ(plain[0].end_sequence, 4);  // 40 of 88 tokens: already the group boundary
  const std::vector<int64_t> cu2 = {0, 10, 20, 30, 40, 46, 52, 58, 64};  // group B of 6-token rows
  const auto tokens_only = areal::trainer::plan_slices(cu2, 2);
  EXPECT_EQ(tokens_only[0].end_sequence, 3);  // 30 of 64: nearest the middle, inside group A
  const auto kept = areal::trainer::plan_slices(cu2, 2, shared);
  EXPECT_EQ(kept[0].end_sequence, 4) << "the cut should move to the group boundary (40 of 64, within the slack)";
  // No slack to move into: balance wins.
  const std::vector<int64_t> cu3 = {0, 100, 200, 300, 400, 410, 420, 430, 440};
  EXPECT_EQ(areal::trainer::plan_slices(cu3, 2, shared)[0].end_sequence, areal::trainer::plan_slices(cu3, 2)[0].end_sequence);
}

TEST(BatchSplit, SharedPrefixesAreReadFromInputIds) {
  areal::HostTensor<int32_t> ids({1, 2, 3, 1, 2, 4, 1, 9, 7, 7}), cu({0, 3, 6, 8, 10});
  areal::TensorMapBuilder b;
  b.add("input_ids", ids.dl()).add("cu_seqlens", cu.dl());
  EXPECT_EQ(ranks::shared_prefixes(*b.get()), (std::vector<int64_t>{0, 2, 1, 0}));
}

TEST(BatchSplit, TokenSequenceAndScalarTensorsGoWhereTheyBelong) {
  areal::HostTensor<int32_t> ids({1, 2, 3, 4, 5, 6, 7}), cu({0, 3, 5, 7});
  areal::HostTensor<float> adv({.1f, .2f, .3f, .4f, .5f, .6f, .7f}), rewards({1.f, 0.f, .5f});
  areal::HostScalar<float> temperature(0.7f);
  areal::TensorMapBuilder b;
  b.add("input_ids", ids.dl()).add("cu_seqlens", cu.dl()).add("advantages", adv.dl()).add("rewards", rewards.dl());
  b.add("temperature", temperature.dl());
  const auto slices = areal::trainer::plan_slices(ranks::cu_seqlens_of(*b.get()), 2);
  const auto parts = ranks::split_batch(*b.get(), slices);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(values_of<int32_t>(named(parts[0], "input_ids")), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(values_of<int32_t>(named(parts[1], "input_ids")), (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(values_of<int32_t>(named(parts[1], "cu_seqlens")), (std::vector<int32_t>{0, 2, 4}));  // rebased
  EXPECT_EQ(values_of<float>(named(parts[1], "advantages")), (std::vector<float>{.4f, .5f, .6f, .7f}));
  EXPECT_EQ(values_of<float>(named(parts[1], "rewards")), (std::vector<float>{0.f, .5f}));  // per sequence
  EXPECT_EQ(named(parts[1], "temperature").shape.size(), 0u);
  EXPECT_FLOAT_EQ(values_of<float>(named(parts[1], "temperature"))[0], 0.7f);
  // A per-token tensor with rows of its own (MoE routed_experts [T, layers, k]) is split by rows.
  areal::HostTensor<int16_t> routed;
  for (int16_t t = 0; t < 7; ++t) routed.values().insert(routed.values().end(), {t, static_cast<int16_t>(10 + t)});
  routed.set_inner_shape({1, 2});
  b.add("routed_experts", routed.dl());
  const auto with_rows = ranks::split_batch(*b.get(), slices);
  EXPECT_EQ(named(with_rows[1], "routed_experts").shape, (std::vector<int64_t>{4, 1, 2}));
  EXPECT_EQ(values_of<int16_t>(named(with_rows[1], "routed_experts")), (std::vector<int16_t>{3, 13, 4, 14, 5, 15, 6, 16}));
  EXPECT_EQ(values_of<int16_t>(named(with_rows[0], "routed_experts")), (std::vector<int16_t>{0, 10, 1, 11, 2, 12}));
  // A tensor of neither length cannot be split, and says so.
  areal::HostTensor<float> odd({1.f, 2.f});
  b.add("odd", odd.dl());
  EXPECT_THROW(ranks::split_batch(*b.get(), slices), areal::Error);
}

TEST(RankMessages, HeaderAndTensorsCrossASocketWhole) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ranks::Message m;
  m.header = {{"op", "train_step"}, {"n", 3}};
  std::vector<float> big(300000);  // larger than a socket buffer: written while the reader reads
  std::iota(big.begin(), big.end(), 0.0f);
  areal::HostTensor<float> t(big);
  m.tensors.push_back(ranks::OwnedTensor::copy_of("x", *t.dl()));
  std::thread writer([&] { ranks::write_message(fds[0], m, "test peer"); });
  const ranks::Message got = ranks::read_message(fds[1], "test peer");
  writer.join();
  EXPECT_EQ(got.header.value("op", ""), "train_step");
  EXPECT_FALSE(got.header.contains("tensors"));
  ASSERT_EQ(got.tensors.size(), 1u);
  EXPECT_EQ(values_of<float>(got.tensors[0]), big);
  close(fds[0]);  // the peer ended: a clear error, not a hang
  try {
    ranks::read_message(fds[1], "train rank 1");
    FAIL() << "read from a closed peer";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("train rank 1 closed its connection"), std::string::npos) << e.what();
  }
  close(fds[1]);
}

areal::ResolvedConfig slurm_config(const std::string& extra_yaml_json) {
  nlohmann::json raw = nlohmann::json::parse(R"({"experiment": {"name": "e", "trial": "t"}, "inference": {"plugin": "mock_inference"}, "gateway": {"plugin": "none"},
    "launcher": {"type": "slurm", "slurm": {"nodes": 2, "partition": "gpu", "time": "01:00:00", "extra_sbatch": ["--exclusive"]}}})");
  raw.merge_patch(nlohmann::json::parse(extra_yaml_json));
  return areal::resolve_config(raw, "/work/cfg");
}

TEST(SlurmJob, ScriptCarriesTheLauncherSectionAndRunsTheController) {
  areal::ResolvedConfig rc = slurm_config(R"({"launcher": {"servers": {"count": 2}, "slurm": {"gpus_per_server": 1}}})");
  ASSERT_TRUE(rc.errors.empty()) << rc.errors[0];
  const auto job = launcher::make_slurm_job(rc, "/work/cfg/x.yaml", {"trainer.total_steps=5", "experiment.trial=it's"}, "/opt/bin/areal-host",
                                            "/work/runs/e/t");
  EXPECT_EQ(job.tasks, 2);
  for (const char* line : {"#SBATCH --job-name=areal-e-t\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks=2\n", "#SBATCH --gpus=2\n",
                           "#SBATCH --partition=gpu\n", "#SBATCH --time=01:00:00\n", "#SBATCH --exclusive\n",
                           "#SBATCH --output=/work/runs/e/t/slurm/job-%j.out\n", "cd /work/cfg\n",
                           "exec /opt/bin/areal-host run --config /work/cfg/x.yaml trainer.total_steps=5 'experiment.trial=it'\\''s'\n"})
    EXPECT_NE(job.script.find(line), std::string::npos) << line << " not in:\n" << job.script;
  EXPECT_EQ(job.script.rfind("#!/bin/bash\n", 0), 0u);
  // A local launcher is not submitted.
  areal::ResolvedConfig local = slurm_config(R"({"launcher": {"type": "local"}})");
  EXPECT_THROW(launcher::make_slurm_job(local, "/x.yaml", {}, "/a", "/r"), areal::Error);
  // No node left for the servers.
  areal::ResolvedConfig full = slurm_config(R"({"launcher": {"servers": {"count": 1}, "slurm": {"train_nodes": 2}}})");
  EXPECT_THROW(launcher::make_slurm_job(full, "/x.yaml", {}, "/a", "/r"), areal::Error);
}

// One task per node at least: --nodes=2 with --ntasks=1 makes Slurm shrink
// the job to one node, and the server would share the controller's.
TEST(SlurmJob, EveryNodeGetsATask) {
  areal::ResolvedConfig rc = slurm_config(R"({"launcher": {"servers": {"count": 1}, "slurm": {"nodes": 3, "train_nodes": 1}}})");
  ASSERT_TRUE(rc.errors.empty()) << rc.errors[0];
  const auto job = launcher::make_slurm_job(rc, "/x.yaml", {}, "/a", "/r");
  EXPECT_EQ(job.tasks, 3);
  EXPECT_NE(job.script.find("#SBATCH --ntasks=3\n"), std::string::npos) << job.script;
}

// A job sbatch submitted is followed even when sbatch (or a site's
// job_submit filter) wrote something before its id.
TEST(SlurmJob, TheJobIdIsFoundAmongSbatchMessages) {
  std::string messages;
  EXPECT_EQ(launcher::parse_sbatch_job_id("12345\n"), "12345");
  EXPECT_EQ(launcher::parse_sbatch_job_id("12345;cluster-a\n"), "12345");
  EXPECT_EQ(launcher::parse_sbatch_job_id("sbatch: INFO: routed to partition gpu\n67890\n", &messages), "67890");
  EXPECT_EQ(messages, "sbatch: INFO: routed to partition gpu\n");
  EXPECT_EQ(launcher::parse_sbatch_job_id("sbatch: error: Batch job submission failed: Invalid account\n"), "");
  EXPECT_EQ(launcher::parse_sbatch_job_id(""), "");
}

TEST(SlurmJob, ShellQuoting) {
  EXPECT_EQ(launcher::shell_quote("a.b=c"), "a.b=c");
  EXPECT_EQ(launcher::shell_quote("a b"), "'a b'");
  EXPECT_EQ(launcher::shell_quote(""), "''");
  EXPECT_EQ(launcher::shell_quote("x'y"), "'x'\\''y'");
}

}  // namespace
