#include "batch_invariant.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <limits>
#include <numeric>
#include <vector>

#include "core/plugin_host/error.hpp"
#include "device.hpp"

namespace areal::torch_model::invariant {

const Shape& shape(torch::Device device) {
  static const Shape gpu{128, 16, 256, 32}, cpu{32, 8, 64, 8};
  return device.is_cuda() ? gpu : cpu;
}

torch::Tensor padded_rows(const torch::Tensor& x) {
  const int64_t chunk = shape(x.device()).rows;
  const int64_t n = x.size(0), pad = (chunk - n % chunk) % chunk;
  if (pad == 0 && n > 0) return x.contiguous();
  std::vector<int64_t> dims = x.sizes().vec();
  dims[0] = n == 0 ? chunk : pad;
  return torch::cat({x, torch::zeros(dims, x.options())}, 0);
}

torch::Tensor by_rows(const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  const int64_t n = x.size(0), chunk = shape(x.device()).rows;
  const torch::Tensor padded = padded_rows(x);
  std::vector<torch::Tensor> outs;
  for (int64_t r = 0; r < padded.size(0); r += chunk) outs.push_back(f(padded.narrow(0, r, chunk)));
  torch::Tensor out = outs.size() == 1 ? outs[0] : torch::cat(outs, 0);
  return out.narrow(0, 0, n);
}

void add_units(std::vector<Unit>& units, const Shape& shape, int64_t path, int64_t first_row, int64_t count, int64_t first_position) {
  for (int64_t i = 0; i < count; i += shape.query_rows) {
    Unit u;
    u.path = path;
    for (int64_t r = i; r < std::min(count, i + shape.query_rows); ++r) u.rows.push_back(first_row + r), u.positions.push_back(first_position + r);
    units.push_back(std::move(u));
  }
}

c10::intrusive_ptr<AttentionPlan> plan_attention(int64_t rows, std::vector<Unit> units, torch::Device device) {
  auto plan = c10::make_intrusive<AttentionPlan>();
  plan->rows = rows;
  plan->shape = shape(device);
  const int64_t per_unit = plan->shape.query_rows, block_keys = plan->shape.key_block, per_call = plan->shape.units_per_call;
  auto extent = [](const Unit& u) { return *std::max_element(u.positions.begin(), u.positions.end()) + 1; };
  for (const Unit& u : units)
    if (u.rows.empty() || u.rows.size() > static_cast<size_t>(per_unit) || u.rows.size() != u.positions.size())
      throw Error(AREAL_CODE_INTERNAL, "batch-invariant attention: a unit needs 1 to query_rows query rows, each with a position");
  // Units that reach furthest first, so a call's units need about as many key blocks.
  std::stable_sort(units.begin(), units.end(), [&](const Unit& a, const Unit& b) { return extent(a) > extent(b); });
  std::vector<int64_t> output_rows(static_cast<size_t>(rows), -1);
  const auto idx = torch::TensorOptions().dtype(torch::kInt64);
  int64_t out_row = 0;
  for (size_t first = 0; first < units.size(); first += static_cast<size_t>(per_call)) {
    AttentionPlan::Call call;
    call.units = std::min<int64_t>(per_call, static_cast<int64_t>(units.size() - first));
    call.blocks = (extent(units[first]) + block_keys - 1) / block_keys;
    std::vector<int64_t> paths, query_rows, positions;
    for (int64_t g = 0; g < per_call; ++g) {
      const Unit& u = units[first + static_cast<size_t>(g < call.units ? g : 0)];  // padding units repeat the first
      paths.push_back(u.path);
      for (int64_t r = 0; r < per_unit; ++r) {
        const bool real = r < static_cast<int64_t>(u.rows.size());
        query_rows.push_back(real ? u.rows[static_cast<size_t>(r)] : rows);
        positions.push_back(real ? u.positions[static_cast<size_t>(r)] : 0);  // padding sees key 0: finite
        if (real && g < call.units) {
          const int64_t row = u.rows[static_cast<size_t>(r)];
          if (row < 0 || row >= rows || output_rows[static_cast<size_t>(row)] >= 0)
            throw Error(AREAL_CODE_INTERNAL, "batch-invariant attention: each query row must be in exactly one unit");
          output_rows[static_cast<size_t>(row)] = out_row + g * per_unit + r;
        }
      }
    }
    call.paths = upload(torch::tensor(paths, idx), device);
    call.query_rows = upload(torch::tensor(query_rows, idx), device);
    call.positions = upload(torch::tensor(positions, idx).view({per_call, per_unit}), device);
    plan->calls.push_back(std::move(call));
    out_row += per_call * per_unit;
  }
  if (std::any_of(output_rows.begin(), output_rows.end(), [](int64_t r) { return r < 0; }))
    throw Error(AREAL_CODE_INTERNAL, "batch-invariant attention: a query row is in no unit");
  plan->output_rows = upload(torch::tensor(output_rows, idx), device);
  return plan;
}

torch::Tensor attend(const torch::Tensor& q, const AttentionPlan& plan, const KeyBlocks& keys, int64_t kv_heads, double scale) {
  const int64_t H = q.size(1), hd = q.size(2), groups = H / kv_heads;
  const int64_t G = plan.shape.units_per_call, M = plan.shape.query_rows, B = plan.shape.key_block;
  const auto dtype = q.scalar_type();
  const auto compute = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const double minus_inf = -std::numeric_limits<double>::infinity();
  const torch::Tensor qpad = torch::cat({q, torch::zeros({1, H, hd}, q.options())}, 0);  // row `rows`: padding queries
  std::vector<torch::Tensor> outs;
  for (const auto& call : plan.calls) {
    // [G * kv, groups * M, hd]: a unit's queries of one KV head's group are that head's rows.
    const torch::Tensor qs = qpad.index_select(0, call.query_rows).view({G, M, kv_heads, groups, hd}).permute({0, 2, 3, 1, 4}).reshape({G * kv_heads, groups * M, hd});
    const auto index = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
    torch::Tensor m, l, acc;
    for (int64_t j = 0; j < call.blocks; ++j) {
      auto [k, v] = keys(call.paths, j);  // [G, B, kv, hd]
      const torch::Tensor kt = k.permute({0, 2, 3, 1}).reshape({G * kv_heads, hd, B});
      const torch::Tensor vt = v.permute({0, 2, 1, 3}).reshape({G * kv_heads, B, hd});
      torch::Tensor s = (torch::bmm(qs, kt).to(compute) * scale).view({G, kv_heads, groups, M, B});
      const torch::Tensor key_pos = torch::arange(j * B, (j + 1) * B, index);
      const torch::Tensor hidden = key_pos.view({1, 1, B}) > call.positions.unsqueeze(2);  // [G, M, B]
      s = s.masked_fill(hidden.view({G, 1, 1, M, B}), minus_inf);
      torch::Tensor p;
      if (j == 0) {  // every query sees key 0: finite maxima from here on
        m = std::get<0>(s.max(-1));
        p = (s - m.unsqueeze(-1)).exp();
        l = p.sum(-1);
        acc = torch::bmm(p.to(dtype).view({G * kv_heads, groups * M, B}), vt).to(compute);
      } else {
        const torch::Tensor m_new = torch::maximum(m, std::get<0>(s.max(-1)));
        const torch::Tensor alpha = (m - m_new).exp();
        p = (s - m_new.unsqueeze(-1)).exp();
        l = l * alpha + p.sum(-1);
        acc = acc * alpha.view({G * kv_heads, groups * M, 1}) + torch::bmm(p.to(dtype).view({G * kv_heads, groups * M, B}), vt).to(compute);
        m = m_new;
      }
    }
    const torch::Tensor o = (acc / l.view({G * kv_heads, groups * M, 1})).to(dtype);
    outs.push_back(o.view({G, kv_heads, groups, M, hd}).permute({0, 3, 1, 2, 4}).reshape({G * M, H * hd}));
  }
  if (outs.empty()) return torch::zeros({0, H * hd}, q.options());
  return torch::cat(outs, 0).index_select(0, plan.output_rows);
}

torch::Tensor path_table(const std::vector<std::vector<int64_t>>& paths, torch::Device device) {
  size_t longest = 1;
  for (const auto& p : paths) longest = std::max(longest, p.size());
  std::vector<int64_t> table;
  table.reserve(paths.size() * longest);
  for (const auto& p : paths) {
    if (p.empty()) throw Error(AREAL_CODE_INTERNAL, "batch-invariant attention: an empty key path");
    for (size_t i = 0; i < longest; ++i) table.push_back(p[std::min(i, p.size() - 1)]);
  }
  return upload(torch::tensor(table, torch::kInt64).view({static_cast<int64_t>(paths.size()), static_cast<int64_t>(longest)}), device);
}

torch::Tensor block_rows(const torch::Tensor& table, const torch::Tensor& paths, int64_t block, int64_t key_block) {
  const torch::Tensor cols = torch::arange(block * key_block, (block + 1) * key_block, paths.options()).clamp_max(table.size(1) - 1);
  return table.index_select(0, paths).index_select(1, cols).reshape({-1});
}

bool row_invariant_products(torch::Device device, torch::ScalarType dtype) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, torch::ScalarType>, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(device.str(), dtype);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  const Shape& s = shape(device);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  // Deterministic values with no random generator touched: a row-wise
  // product at the chunk's shape, and a block of queries against keys.
  auto values = [&](int64_t rows, int64_t cols, double phase) {
    return (torch::arange(rows * cols, opts).view({rows, cols}) * 0.731 + phase).sin().to(device, dtype);
  };
  bool same = true;
  for (const auto& [rows, inner, cols] : {std::array<int64_t, 3>{s.rows, 64, 96}, std::array<int64_t, 3>{s.query_rows, 64, s.key_block}}) {
    const torch::Tensor x = values(rows, inner, 0.1), w = values(cols, inner, 0.7);
    const torch::Tensor y = torch::matmul(x, w.t());
    // The same rows in reverse order and rotated: every row at other places.
    same = same && torch::equal(torch::matmul(x.flip(0), w.t()).flip(0), y) &&
           torch::equal(torch::matmul(x.roll(rows / 3, 0), w.t()).roll(-(rows / 3), 0), y);
  }
  known[key] = same;
  return same;
}

}  // namespace areal::torch_model::invariant
