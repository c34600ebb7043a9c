#include "core/trainer/prefix_tree.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace areal::trainer {
namespace {

// A trie node: one token at one depth, shared by every row through it.
struct Node {
  int32_t id = 0;
  std::map<int32_t, int64_t> children;  // token id -> node; ordered, so packing is deterministic
};

}  // namespace

PrefixTree PrefixTree::build(const std::vector<std::vector<int32_t>>& rows) {
  std::vector<Node> nodes(1);  // 0: the root, above every row's first token
  std::vector<std::vector<int64_t>> row_nodes(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t at = 0;
    for (const int32_t id : rows[r]) {
      auto it = nodes[static_cast<size_t>(at)].children.find(id);
      if (it == nodes[static_cast<size_t>(at)].children.end()) {
        nodes.push_back(Node{id, {}});
        it = nodes[static_cast<size_t>(at)].children.emplace(id, static_cast<int64_t>(nodes.size()) - 1).first;
      }
      at = it->second;
      row_nodes[r].push_back(at);
    }
  }
  // Depth first, each node's children in token order. A node opens a new
  // segment when it starts a row path (a root child) or its parent branches.
  PrefixTree t;
  std::vector<int64_t> packed_of(nodes.size(), -1);
  struct Visit {
    int64_t node, parent_packed, parent_segment, depth;
    bool opens;
  };
  std::vector<Visit> stack;
  const auto& roots = nodes[0].children;
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.push_back({it->second, -1, -1, 0, true});
  while (!stack.empty()) {
    const Visit v = stack.back();
    stack.pop_back();
    const int64_t packed = static_cast<int64_t>(t.ids.size());
    int64_t segment = v.parent_segment;
    if (v.opens) {
      t.segments.push_back({packed, packed, v.parent_segment});
      segment = static_cast<int64_t>(t.segments.size()) - 1;
    }
    t.segments[static_cast<size_t>(segment)].end = packed + 1;
    packed_of[static_cast<size_t>(v.node)] = packed;
    t.ids.push_back(nodes[static_cast<size_t>(v.node)].id);
    t.position.push_back(v.depth);
    t.previous.push_back(v.parent_packed);
    t.segment_of.push_back(segment);
    const auto& children = nodes[static_cast<size_t>(v.node)].children;
    const bool branches = children.size() > 1;
    for (auto it = children.rbegin(); it != children.rend(); ++it) stack.push_back({it->second, packed, segment, v.depth + 1, branches});
  }
  t.row_offsets.push_back(0);
  for (const auto& path : row_nodes) {
    for (const int64_t n : path) t.row_index.push_back(packed_of[static_cast<size_t>(n)]);
    t.row_offsets.push_back(static_cast<int64_t>(t.row_index.size()));
  }
  return t;
}

std::vector<int64_t> PrefixTree::path(int64_t segment) const {
  std::vector<int64_t> out;
  for (int64_t s = segment; s >= 0; s = segments[static_cast<size_t>(s)].parent) out.push_back(s);
  std::reverse(out.begin(), out.end());
  return out;
}

namespace {
uint64_t edge(int64_t node, int32_t id) { return (static_cast<uint64_t>(node) << 32) | static_cast<uint32_t>(id); }
}  // namespace

int64_t PrefixCounter::new_tokens(const int32_t* ids, int64_t n) const {
  int64_t at = 0, shared = 0;
  for (; shared < n; ++shared) {
    const auto it = child_.find(edge(at, ids[shared]));
    if (it == child_.end()) break;
    at = it->second;
  }
  return n - shared;
}

void PrefixCounter::add(const int32_t* ids, int64_t n) {
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto [it, added] = child_.try_emplace(edge(at, ids[i]), nodes_ + 1);
    if (added) ++nodes_;
    at = it->second;
  }
}

void PrefixCounter::clear() {
  child_.clear();
  nodes_ = 0;
}

}  // namespace areal::trainer
