// Greedy fusion over the graph's topological order. One group is open at a time: a node joins it
// when the lowering can compute it inside the group's kernel (same iteration shape, an index-map
// view of a member, a reduction of the members, or a pointwise consumer of the group's anchor).
// A node that cannot join and reads nothing of the open group (a constant, a view or data movement
// of other values) is scheduled before the open group, which stays open: a bias reshape between a
// matmul and its bias add does not split them. Every group still comes after its inputs'
// producers, so fusing never creates a cycle.
#include "core/passes/fusion.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/ir/strided_view.h"
#include "core/passes/graph_edit.h"

namespace kiln {
namespace {

FusionKind kind_alone(const Node& n) {
  if (n.kind == OpKind::Constant) return FusionKind::Constant;
  if (is_elementwise(n)) return FusionKind::Pointwise;
  if (is_plain_reduction(n)) return FusionKind::Reduce;
  return FusionKind::Single;
}

using Users = std::map<const Value*, std::vector<const Node*>>;

// A value its kernel stores whatever reads it: the graph returns it, or nothing reads it.
bool returned_or_unread(const Value* v, const Users& users, const std::set<const Value*>& graph_outputs) {
  auto it = users.find(v);
  return graph_outputs.count(v) || it == users.end() || it->second.empty();
}

// The buffers a kernel computing `nodes` binds: the values it reads from outside, and its values
// read outside it, returned, or never read.
size_t bound_buffers(const std::vector<const Node*>& nodes, const Users& users,
                     const std::set<const Value*>& graph_outputs) {
  std::set<const Node*> members(nodes.begin(), nodes.end());
  std::set<const Value*> bound;
  for (const Node* m : nodes) {
    for (const Value* v : m->inputs)
      if (!v->producer || !members.count(v->producer)) bound.insert(v);
    for (const Value* v : m->outputs) {
      bool needed = returned_or_unread(v, users, graph_outputs);
      if (auto it = users.find(v); it != users.end())
        for (const Node* u : it->second) needed = needed || !members.count(u);
      if (needed) bound.insert(v);
    }
  }
  return bound.size();
}

// Views may go in front of a group's nodes when its kernel has no anchor, or a plain reduction
// for one: lower_group's form is [pointwise and views] [anchor [pointwise epilogue]], and only a
// reduction takes nodes before it.
bool takes_views_in_front(const FusionGroup& g) {
  if (g.template_anchor || g.kind == FusionKind::Constant) return false;
  for (const Node* n : g.nodes)
    if (!is_elementwise(*n) && !is_index_view(*n)) return is_plain_reduction(*n);
  return true;
}

// Whether `reader` gathers from `views`' values (index_select's data): kept in memory, the views
// are read in order once instead of through their index maps at each gathered element.
bool gathers_from(const FusionGroup& reader, const FusionGroup& views) {
  std::set<const Value*> made;
  for (const Node* n : views.nodes)
    for (const Value* v : n->outputs) made.insert(v);
  for (const Node* n : reader.nodes)
    if (n->kind == OpKind::IndexSelect && made.count(n->inputs[0])) return true;
  return false;
}

// Each node's group, by index.
std::map<const Node*, size_t> group_numbers(const std::vector<FusionGroup>& groups) {
  std::map<const Node*, size_t> group_of;
  for (size_t i = 0; i < groups.size(); ++i)
    for (const Node* n : groups[i].nodes) group_of[n] = i;
  return group_of;
}

// Elements of the largest value `g` writes, at the traced sizes.
int64_t largest_output_elements(const FusionGroup& g) {
  int64_t most = 0;
  for (const Node* n : g.nodes)
    for (const Value* v : n->outputs) most = std::max(most, numel(v->type.shape).hint());
  return most;
}

// Data movement scheduled as a kernel of its own (views of values from before the open group
// close one group each) moves into the one group that reads it, up to the options' size: that
// kernel reads through the views' index maps, and the copy is never written. A chain of views
// moves whole, since groups are visited last to first.
void inline_view_groups(std::vector<FusionGroup>& groups, const Users& users,
                        const std::set<const Value*>& graph_outputs, const FusionOptions& options) {
  std::map<const Node*, size_t> group_of = group_numbers(groups);
  for (size_t i = groups.size(); i-- > 0;) {
    FusionGroup& g = groups[i];
    if (g.kind == FusionKind::Constant || g.template_anchor || g.nodes.empty()) continue;
    bool views = true;
    for (const Node* n : g.nodes) views = views && is_index_view(*n);
    if (!views || largest_output_elements(g) > options.inline_views_up_to) continue;
    std::set<size_t> readers;
    bool kept = false;  // returned or never read: it must reach memory
    for (const Node* n : g.nodes)
      for (const Value* v : n->outputs) {
        kept = kept || returned_or_unread(v, users, graph_outputs);
        if (auto it = users.find(v); it != users.end())
          for (const Node* u : it->second)
            if (group_of.at(u) != i) readers.insert(group_of.at(u));
      }
    if (kept || readers.size() != 1 || gathers_from(groups[*readers.begin()], g)) continue;
    FusionGroup& reader = groups[*readers.begin()];
    if (!takes_views_in_front(reader) || g.nodes.size() + reader.nodes.size() > options.max_group_nodes)
      continue;
    std::vector<const Node*> merged = g.nodes;
    merged.insert(merged.end(), reader.nodes.begin(), reader.nodes.end());
    if (options.max_group_buffers != SIZE_MAX &&
        bound_buffers(merged, users, graph_outputs) > options.max_group_buffers)
      continue;
    for (const Node* n : g.nodes) group_of[n] = *readers.begin();
    reader.nodes = std::move(merged);
    if (reader.kind == FusionKind::Single) reader.kind = FusionKind::Pointwise;
    g.nodes.clear();
  }
  std::erase_if(groups, [](const FusionGroup& g) { return g.nodes.empty(); });
}

// The views (reshape, permute, expand, slice) from a value to `anchor`'s (or an epilogue node's)
// input `index`, source first, each read only by the next (the last by the anchor, once), kept
// only where their groups hold nothing else: the chain a template may read in place.
std::vector<const Node*> view_chain_into(const Node* anchor, size_t index, const std::vector<FusionGroup>& groups,
                                         const std::map<const Node*, size_t>& group_of, const Users& users,
                                         const std::set<const Value*>& graph_outputs) {
  std::vector<const Node*> chain;
  const Value* v = anchor->inputs[index];
  const Node* reader = anchor;
  while (v->producer && is_stride_view(v->producer->kind) && is_index_view(*v->producer) && !graph_outputs.count(v)) {
    auto it = users.find(v);
    if (it == users.end() || it->second.size() != 1 || it->second[0] != reader) break;
    reader = v->producer;
    chain.insert(chain.begin(), reader);
    v = reader->inputs[0];
  }
  // Only whole groups move: views leave the chain's source end while a group they share holds more.
  while (!chain.empty()) {
    std::set<const Node*> in_chain(chain.begin(), chain.end());
    bool whole = true;
    for (const Node* n : chain)
      for (const Node* m : groups[group_of.at(n)].nodes) whole = whole && in_chain.count(m);
    if (whole) break;
    chain.erase(chain.begin());
  }
  return chain;
}

// Views whose only reader is a template's anchor (a transpose or a head split before a matmul)
// join its group where the template reads them in place: the copy is never written. The group's
// generic kernel, run where the template declines, reads them through their index maps.
void views_into_templates(std::vector<FusionGroup>& groups, const Users& users,
                          const std::set<const Value*>& graph_outputs, const FusionOptions& options) {
  const std::map<const Node*, size_t> group_of = group_numbers(groups);
  for (FusionGroup& g : groups) {
    if (!g.template_anchor || g.anchor != 0) continue;
    const Node* anchor = g.nodes[0];
    const std::vector<const Node*> epilogue(g.nodes.begin() + 1, g.nodes.end());
    std::vector<std::vector<const Node*>> views;
    std::vector<const Node*> moved;
    // The chain into `reader`'s input `index`, taken where the template reads it in place.
    auto take = [&](const Node* reader, size_t index) {
      views.push_back(view_chain_into(reader, index, groups, group_of, users, graph_outputs));
      if (views.back().empty()) return;
      if (options.template_views(*anchor, epilogue, views))
        moved.insert(moved.end(), views.back().begin(), views.back().end());
      else
        views.back().clear();
    };
    for (size_t i = 0; i < anchor->inputs.size(); ++i) take(anchor, i);
    // The epilogue's operands likewise (a slice of a projection added to an RNN step's product).
    for (const ChainStep& c : template_chain(*anchor, epilogue))
      if (c.operand) take(c.node, c.operand_first ? 0 : 1);
    if (moved.empty()) continue;
    for (const Node* n : moved) std::erase(groups[group_of.at(n)].nodes, n);
    g.anchor = moved.size();
    g.nodes.insert(g.nodes.begin(), moved.begin(), moved.end());
  }
  std::erase_if(groups, [](const FusionGroup& g) { return g.nodes.empty(); });
}

// A pointwise group that continues another pointwise group's last value joins it, which then also
// stores what the later group stored: one launch and one read of that value fewer. Two cases the
// greedy pass leaves apart, since other nodes came between in the graph's order:
// - views left as a kernel of their own (a transpose a matmul template does not read in place);
// - pointwise nodes after a value others read too (a relu after a batch norm whose output the
//   backward keeps, with the running statistics' updates in between).
// The later group's nodes must be what the greedy pass would join to the earlier one (pointwise of
// its iteration shape, views keeping the element count), and everything else it reads must come
// from before the earlier group, so the joined kernel can run in its place.
void continuations_into_producers(std::vector<FusionGroup>& groups, const Users& users,
                                  const std::set<const Value*>& graph_outputs, const FusionOptions& options) {
  std::map<const Node*, size_t> group_of = group_numbers(groups);
  for (size_t i = 0; i < groups.size(); ++i) {
    FusionGroup& g = groups[i];
    if (g.kind == FusionKind::Constant || g.template_anchor || g.nodes.empty()) continue;
    std::set<const Node*> members(g.nodes.begin(), g.nodes.end());
    // The latest kernel g reads from: the one it would join (constants are no kernel's).
    size_t p = SIZE_MAX;
    for (const Node* n : g.nodes)
      for (const Value* v : n->inputs) {
        if (!v->producer || members.count(v->producer)) continue;
        const size_t k = group_of.at(v->producer);
        if (groups[k].kind != FusionKind::Constant && (p == SIZE_MAX || k > p)) p = k;
      }
    if (p == SIZE_MAX || p >= i) continue;
    FusionGroup& producer = groups[p];
    if (producer.kind != FusionKind::Pointwise || producer.template_anchor || producer.nodes.empty() ||
        producer.nodes.size() + g.nodes.size() > options.max_group_nodes)
      continue;
    const Value* last = producer.nodes.back()->output();
    Shape space = last->type.shape;
    bool continues = false, joins = true;
    for (const Node* n : g.nodes) {
      for (const Value* v : n->inputs) continues = continues || v == last;
      if (is_elementwise(*n)) {
        joins = joins && same_shape(n->output()->type.shape, space);
      } else {  // a view of the last value or of a member before it, keeping its element count
        const Value* in = n->inputs.empty() ? nullptr : n->inputs[0];
        joins = joins && options.fuse_views && is_index_view(*n) && n->kind != OpKind::IndexSelect &&
                n->inputs.size() == 1 && (in == last || (in->producer && members.count(in->producer))) &&
                numel(in->type.shape).same_as(numel(n->output()->type.shape));
        space = n->output()->type.shape;
      }
    }
    if (!continues || !joins) continue;
    std::vector<const Node*> merged = producer.nodes;
    merged.insert(merged.end(), g.nodes.begin(), g.nodes.end());
    if (options.max_group_buffers != SIZE_MAX &&
        bound_buffers(merged, users, graph_outputs) > options.max_group_buffers)
      continue;
    for (const Node* n : g.nodes) group_of[n] = p;
    producer.nodes = std::move(merged);
    g.nodes.clear();
  }
  std::erase_if(groups, [](const FusionGroup& g) { return g.nodes.empty(); });
}

}  // namespace

TemplateOperand template_operand(const FusionGroup& group, const Value* read) {
  const std::set<const Node*> views(group.nodes.begin(), group.nodes.begin() + long(group.anchor));
  TemplateOperand operand{read, {}};
  while (operand.source->producer && views.count(operand.source->producer)) {
    operand.views.insert(operand.views.begin(), operand.source->producer);
    operand.source = operand.source->producer->inputs[0];
  }
  return operand;
}

std::vector<int> FusionGroup::origins() const {
  std::vector<int> ids;
  for (const Node* n : nodes) ids.push_back(n->id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<FusionGroup> fuse_graph(const Graph& graph, const FusionOptions& options) {
  Users users;
  std::vector<Node*> nodes = graph.nodes();
  for (const Node* n : nodes)
    for (const Value* v : n->inputs) users[v].push_back(n);
  std::set<const Value*> graph_outputs(graph.outputs().begin(), graph.outputs().end());

  std::vector<FusionGroup> groups;
  // The open group is always groups.back(); nodes scheduled ahead of it are inserted before it.
  struct Open {
    bool active = false;
    std::set<const Node*> members;
    Shape space;                  // the shape a pointwise node needs to join
    const Node* anchor = nullptr; // the reduction/matmul/conv; after it only epilogue nodes join
    bool template_anchor = false; // the anchor runs as the backend's template: a chain joins it
  } open;

  auto add_closed = [&](const Node* n) {
    FusionGroup g{kind_alone(*n), {n}, {}};
    if (open.active) groups.insert(groups.end() - 1, std::move(g));
    else groups.push_back(std::move(g));
  };
  auto join = [&](const Node* n) {
    groups.back().nodes.push_back(n);
    open.members.insert(n);
  };
  auto reads_open = [&](const Node* n) {
    for (const Value* v : n->inputs)
      if (v->producer && open.members.count(v->producer)) return true;
    return false;
  };
  // Nothing but members (and `extra`) reads the members' values: the kernel need not store them,
  // which a reduction (its space is its output) or a size-changing view (its space has another
  // element count) could not do.
  auto read_only_inside = [&](const Node* extra) {
    for (const Node* m : open.members) {
      const Value* v = m->output();
      if (returned_or_unread(v, users, graph_outputs)) return false;
      for (const Node* u : users[v])
        if (!open.members.count(u) && u != extra) return false;
    }
    return true;
  };
  // A matmul/conv takes an epilogue only when pointwise nodes of its shape are its sole readers:
  // storing its result as well would cost the same traffic as the unfused kernels.
  auto only_pointwise_readers = [&](const Node* anchor) {
    const Value* v = anchor->output();
    if (returned_or_unread(v, users, graph_outputs)) return false;
    for (const Node* u : users[v])
      if (!is_elementwise(*u) || !same_shape(u->output()->type.shape, v->type.shape)) return false;
    return true;
  };

  // The template's epilogue is a chain: n reads the group's last value, which nothing else reads,
  // and at most one value from outside the group.
  auto extends_template_chain = [&](const Node* n) {
    const FusionGroup& g = groups.back();
    const Value* last = g.nodes.back()->output();
    if (!is_elementwise(*n) || n->inputs.size() > 2 || !same_shape(n->output()->type.shape, open.space) ||
        graph_outputs.count(last) || users[last].size() != 1 || users[last][0] != n)
      return false;
    for (const Value* v : n->inputs)
      if (v != last && v->producer && open.members.count(v->producer)) return false;
    std::vector<const Node*> epilogue(g.nodes.begin() + 1, g.nodes.end());
    epilogue.push_back(n);
    return options.template_epilogue(*open.anchor, epilogue);
  };

  // The buffers the open group's kernel would bind with `extra` in it (an upper bound: a later
  // member may still take a reader in).
  auto buffers_with = [&](const Node* extra) {
    std::vector<const Node*> with(open.members.begin(), open.members.end());
    with.push_back(extra);
    return bound_buffers(with, users, graph_outputs);
  };

  auto try_join = [&](const Node* n) {
    FusionGroup& g = groups.back();
    if (g.nodes.size() >= options.max_group_nodes) return false;
    if (options.max_group_buffers != SIZE_MAX && buffers_with(n) > options.max_group_buffers) return false;
    if (open.template_anchor) {
      if (!extends_template_chain(n)) return false;
      join(n);
      g.kind = FusionKind::Epilogue;
      return true;
    }
    const Value* in = n->inputs.empty() ? nullptr : n->inputs[0];
    if (!open.anchor) {
      if (is_elementwise(*n) && same_shape(n->output()->type.shape, open.space)) {
        join(n);
        return true;
      }
      // An index_select starts a group instead: reading its data through the group's index maps
      // would redo them, scattered, for every element it gathers more than once.
      if (options.fuse_views && is_index_view(*n) && n->kind != OpKind::IndexSelect && in->producer &&
          open.members.count(in->producer)) {
        bool keeps_size = numel(in->type.shape).same_as(numel(n->output()->type.shape));
        if (!keeps_size && !read_only_inside(n)) return false;
        join(n);
        open.space = n->output()->type.shape;
        return true;
      }
      if (options.fuse_reductions && is_plain_reduction(*n) && in->producer &&
          open.members.count(in->producer) && same_shape(in->type.shape, open.space) && read_only_inside(n)) {
        join(n);
        g.kind = FusionKind::Reduce;
        open.anchor = n;
        open.space = n->output()->type.shape;
        return true;
      }
      return false;
    }
    if (!options.fuse_epilogues || !is_elementwise(*n) || !reads_open(n) ||
        !same_shape(n->output()->type.shape, open.space))
      return false;
    if (!is_plain_reduction(*open.anchor) && !only_pointwise_readers(open.anchor)) return false;
    join(n);
    if (g.kind == FusionKind::Single) g.kind = FusionKind::Epilogue;
    return true;
  };

  auto start = [&](const Node* n) {
    open = Open{};
    bool chain = is_elementwise(*n) || (options.fuse_views && is_index_view(*n));
    bool kept = options.fuse_epilogues && is_epilogue_anchor(*n) && options.keep_alone && options.keep_alone(*n);
    bool anchor = options.fuse_epilogues && is_epilogue_anchor(*n) && (!kept || options.template_epilogue);
    groups.push_back({chain ? FusionKind::Pointwise : kind_alone(*n), {n}, {}});
    groups.back().template_anchor = kept;
    if (!chain && !anchor) return;
    open.active = true;
    open.members = {n};
    open.space = n->output()->type.shape;
    if (anchor) open.anchor = n;
    open.template_anchor = kept;
  };

  for (const Node* n : nodes) {
    if (!options.fuse) {
      groups.push_back({kind_alone(*n), {n}, {}});
      continue;
    }
    if (n->kind == OpKind::Constant) {
      add_closed(n);
      continue;
    }
    if (open.active) {
      if (try_join(n)) continue;
      // Pointwise nodes and anchors start groups of their own; anything else that does not need
      // the open group runs before it.
      if (!reads_open(n) && !is_elementwise(*n) && !is_epilogue_anchor(*n)) {
        add_closed(n);
        continue;
      }
    }
    start(n);
  }

  if (options.fuse && options.fuse_views && options.inline_views_up_to > 0)
    inline_view_groups(groups, users, graph_outputs, options);
  if (options.fuse && options.fuse_views && options.template_views)
    views_into_templates(groups, users, graph_outputs, options);
  if (options.fuse) continuations_into_producers(groups, users, graph_outputs, options);

  for (FusionGroup& g : groups) {
    std::set<const Node*> members(g.nodes.begin(), g.nodes.end());
    for (const Node* m : g.nodes)
      for (const Value* v : m->outputs) {
        bool needed = returned_or_unread(v, users, graph_outputs);
        for (const Node* u : users[v]) needed = needed || !members.count(u);
        if (needed) g.outputs.push_back(v);
      }
  }
  return groups;
}

std::vector<ChainStep> template_chain(const Node& anchor, std::span<const Node* const> epilogue) {
  std::vector<ChainStep> chain;
  const Value* last = anchor.output();
  for (const Node* n : epilogue) {
    ChainStep step{n};
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (n->inputs[i] != last) {
        step.operand = n->inputs[i];
        step.operand_first = i == 0;
      }
    chain.push_back(step);
    last = n->output();
  }
  return chain;
}

std::string describe_groups(const std::vector<FusionGroup>& groups) {
  std::string text;
  int kernels = 0;
  for (const FusionGroup& g : groups) {
    if (g.kind == FusionKind::Constant) continue;
    ++kernels;
    text += " [";
    for (size_t i = 0; i < g.nodes.size(); ++i)
      text += (i ? "," : "") + std::string(op_name(g.nodes[i]->kind));
    text += "]";
  }
  return std::to_string(kernels) + (kernels == 1 ? " kernel:" : " kernels:") + text;
}

}  // namespace kiln
