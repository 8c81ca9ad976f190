// plan_memory: in-place merging, then greedy-by-size best-fit offsets per arena.
#include "core/runtime/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/support/error.h"

namespace kiln {
namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Values that share bytes through in-place writes: one block with the union of their lifetimes.
struct Block {
  size_t bytes = 0;    // aligned
  size_t raw = 0;      // largest value's bytes, for the lower bound
  int first = 0, last = 0;
  std::string name;
  int arena = -1;
  size_t offset = 0;
};

bool overlap_in_time(const Block& a, const Block& b) { return a.first <= b.last && b.first <= a.last; }

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::string MemoryPlan::str() const {
  return "naive " + mib(naive_bytes) + ", lower bound " + mib(lower_bound_bytes) + ", planned " +
         mib(planned_bytes) + " (" + std::to_string(arena_bytes.size()) +
         (arena_bytes.size() == 1 ? " arena" : " arenas") + ", " + std::to_string(in_place) + " in place)";
}

MemoryPlan plan_memory(const std::vector<PlanValue>& values, const MemoryPlanOptions& options) {
  const size_t align = std::max<size_t>(options.alignment, 1);
  MemoryPlan plan;
  plan.placements.resize(values.size());
  for (const PlanValue& v : values) {
    if (v.last < v.first)
      throw Error("plan_memory: value " + v.name + " is read (kernel " + std::to_string(v.last) +
                  ") before it is written (kernel " + std::to_string(v.first) + ")");
    plan.naive_bytes += int64_t(v.bytes);
  }

  // In place: a value takes over a donor read by its producing kernel and dead afterwards, when
  // the sizes match. Values are visited in write order so chains (a -> b -> c) share one block.
  std::vector<int> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return values[size_t(a)].first < values[size_t(b)].first; });
  std::vector<int> block_of(values.size(), -1);
  std::vector<bool> donated(values.size(), false);
  std::vector<Block> blocks;
  for (int i : order) {
    const PlanValue& v = values[size_t(i)];
    size_t bytes = round_up(std::max<size_t>(v.bytes, 1), align);
    int donor = v.in_place_of;
    if (options.in_place && donor >= 0 && size_t(donor) < values.size() && !donated[size_t(donor)] &&
        block_of[size_t(donor)] >= 0 && values[size_t(donor)].last == v.first &&
        values[size_t(donor)].bytes == v.bytes) {
      Block& b = blocks[size_t(block_of[size_t(donor)])];
      if (b.last == v.first) {  // the donor is the block's last occupant
        donated[size_t(donor)] = true;
        block_of[size_t(i)] = block_of[size_t(donor)];
        b.last = v.last;
        plan.placements[size_t(i)].in_place = true;
        ++plan.in_place;
        continue;
      }
    }
    block_of[size_t(i)] = int(blocks.size());
    blocks.push_back({bytes, v.bytes, v.first, v.last, v.name});
  }

  int last_kernel = 0;
  for (const Block& b : blocks) last_kernel = std::max(last_kernel, b.last);
  for (int k = 0; k <= last_kernel && !blocks.empty(); ++k) {
    int64_t live = 0;
    for (const Block& b : blocks)
      if (b.first <= k && k <= b.last) live += int64_t(b.raw);
    plan.lower_bound_bytes = std::max(plan.lower_bound_bytes, live);
  }

  std::vector<size_t> by_size(blocks.size());
  std::iota(by_size.begin(), by_size.end(), size_t(0));
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    if (blocks[a].bytes != blocks[b].bytes) return blocks[a].bytes > blocks[b].bytes;
    return blocks[a].first < blocks[b].first;
  });
  const size_t limit = options.max_buffer_bytes;
  for (size_t bi : by_size) {
    Block& blk = blocks[bi];
    if (blk.bytes > limit)
      throw Error("memory plan: value " + blk.name + " needs " + std::to_string(blk.bytes) +
                  " bytes, more than the device's largest buffer (" + std::to_string(limit) +
                  " bytes); split the tensor or use a device with a larger maxStorageBufferRange");
    for (int arena = 0;; ++arena) {
      std::vector<const Block*> busy;  // placed in this arena and live at the same time
      for (const Block& other : blocks)
        if (other.arena == arena && overlap_in_time(other, blk)) busy.push_back(&other);
      std::sort(busy.begin(), busy.end(), [](const Block* a, const Block* b) { return a->offset < b->offset; });
      size_t cursor = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
      for (const Block* o : busy) {
        if (o->offset > cursor && o->offset - cursor >= blk.bytes && o->offset - cursor < best_gap) {
          best = cursor;
          best_gap = o->offset - cursor;
        }
        cursor = std::max(cursor, o->offset + o->bytes);
      }
      if (best == SIZE_MAX && cursor <= limit && limit - cursor >= blk.bytes) best = cursor;
      if (best == SIZE_MAX) continue;  // no room below the limit here: try the next arena
      blk.arena = arena;
      blk.offset = best;
      if (plan.arena_bytes.size() <= size_t(arena)) plan.arena_bytes.resize(size_t(arena) + 1, 0);
      plan.arena_bytes[size_t(arena)] = std::max(plan.arena_bytes[size_t(arena)], best + blk.bytes);
      break;
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const Block& b = blocks[size_t(block_of[i])];
    plan.placements[i].arena = b.arena;
    plan.placements[i].offset = b.offset;
  }
  for (size_t a : plan.arena_bytes) plan.planned_bytes += int64_t(a);
  return plan;
}

}  // namespace kiln
