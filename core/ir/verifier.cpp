// Graph verifier (see verifier.h): definitions before uses, single definitions, arity, complete
// and well-typed attributes, output types equal to the shape rule's, defined graph outputs.
#include "core/ir/verifier.h"

#include <set>

#include "core/support/error.h"

namespace kiln {
namespace {

bool same_type(const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
  for (size_t i = 0; i < a.shape.size(); ++i)
    if (!a.shape[i].same_as(b.shape[i])) return false;  // structural: no guard is recorded
  return true;
}

std::string types_str(const std::vector<TensorType>& types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].str();
  return "(" + s + ")";
}

std::string value_str(const Value* v) { return "%" + std::to_string(v->id); }

class Verifier {
 public:
  explicit Verifier(const Graph& g) : graph_(g) {
    for (const Value* v : g.inputs()) anywhere_.insert(v);
    for (const Node* n : g.nodes())
      for (const Value* v : n->outputs) anywhere_.insert(v);
  }

  std::vector<std::string> run() {
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      const Value* v = graph_.inputs()[i];
      std::string who = "graph input " + std::to_string(i);
      if (!v) {
        problems_.push_back(who + " is null");
        continue;
      }
      if (!defined_.insert(v).second)
        problems_.push_back(who + ": value " + value_str(v) + " is defined more than once");
      if (v->producer)
        problems_.push_back(who + ": value " + value_str(v) + " also has a producer node");
    }
    for (const Node* n : graph_.nodes()) check_node(*n);
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const Value* v = graph_.outputs()[i];
      std::string who = "graph output " + std::to_string(i);
      if (!v) problems_.push_back(who + " is null");
      else if (!defined_.count(v))
        problems_.push_back(who + ": value " + value_str(v) + " is not defined in this graph");
    }
    return std::move(problems_);
  }

 private:
  void report(const std::string& who, const std::string& what) { problems_.push_back(who + ": " + what); }

  void check_node(const Node& n) {
    std::string who = "node " + std::to_string(n.id) + " '" + std::string(op_name(n.kind)) + "'";
    if (!n.provenance.empty()) who += " at " + n.provenance.str();
    bool typable = true;  // the shape rule can only judge a node whose inputs and attrs are sound

    const OpDef* def = nullptr;
    try {
      def = &op_def(n.kind);
    } catch (const Error& e) {
      report(who, e.what());
      typable = false;
    }

    int count = int(n.inputs.size());
    if (def && (count < def->min_inputs || (def->max_inputs >= 0 && count > def->max_inputs))) {
      std::string want = def->max_inputs < 0 ? "at least " + std::to_string(def->min_inputs)
                         : def->min_inputs == def->max_inputs
                             ? std::to_string(def->min_inputs)
                             : std::to_string(def->min_inputs) + ".." + std::to_string(def->max_inputs);
      report(who, "takes " + want + " inputs, got " + std::to_string(count));
      typable = false;
    }

    std::vector<TensorType> in_types;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* v = n.inputs[i];
      std::string which = "input " + std::to_string(i);
      if (!v) {
        report(who, which + " is null");
        typable = false;
        continue;
      }
      in_types.push_back(v->type);
      if (defined_.count(v)) continue;
      typable = false;
      report(who, which + " (" + value_str(v) + ") " +
                      (anywhere_.count(v) ? "is used before it is defined"
                                          : "is not defined in this graph"));
    }

    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value* v = n.outputs[i];
      std::string which = "output " + std::to_string(i);
      if (!v) {
        report(who, which + " is null");
        typable = false;
        continue;
      }
      if (!defined_.insert(v).second)
        report(who, which + ": value " + value_str(v) + " is defined more than once");
      if (v->producer != &n || v->output_index != int(i))
        report(who, which + " (" + value_str(v) + ") does not record this node as its producer");
    }

    if (def) {
      try {
        AttrMap complete = complete_attrs(n.kind, n.attrs, n.provenance);
        // complete_attrs only fills defaults and converts coercible types (int -> float), so
        // any difference from what is stored is a missing or a converted attribute.
        std::string missing, converted;
        for (const auto& [name, value] : complete) {
          if (!n.attrs.has(name)) missing += (missing.empty() ? "'" : ", '") + name + "'";
          else if (attr_type(n.attrs.get(name)) != attr_type(value))
            converted += (converted.empty() ? "'" : ", '") + name + "' is " +
                         attr_type_name(attr_type(n.attrs.get(name))) + ", declared " +
                         attr_type_name(attr_type(value));
        }
        if (!missing.empty())
          report(who, "attributes are incomplete: missing " + missing +
                          " (add_node fills defaults; write every attribute)");
        if (!converted.empty())
          report(who, "attributes are not in their declared types: " + converted);
      } catch (const Error& e) {
        report(who, e.what());
        typable = false;
      }
    }

    for (const auto& [name, attr] : n.attrs)  // a control-flow op's subgraphs are judged too
      if (const auto* sub = std::get_if<std::shared_ptr<const Graph>>(&attr)) {
        if (!*sub) {
          report(who, "subgraph '" + name + "' is null");
          typable = false;
          continue;
        }
        for (const std::string& problem : Verifier(**sub).run()) report(who, "in subgraph '" + name + "': " + problem);
      }

    if (!typable) return;
    std::vector<TensorType> written;
    for (const Value* v : n.outputs) written.push_back(v->type);
    std::vector<TensorType> inferred;
    try {
      inferred = infer_types(n.kind, in_types, n.attrs, n.provenance);
    } catch (const Error& e) {
      report(who, std::string("the shape rule rejects it: ") + e.what());
      return;
    } catch (const std::exception& e) {
      // A rule should fail() with a kiln::Error; still, one bad rule must not hide the rest.
      report(who, std::string("the shape rule failed unexpectedly: ") + e.what());
      return;
    }
    if (inferred.size() != written.size()) {
      report(who, "has " + std::to_string(written.size()) + " outputs " + types_str(written) +
                      ", the op gives " + std::to_string(inferred.size()) + " " + types_str(inferred));
      return;
    }
    for (size_t i = 0; i < written.size(); ++i)
      if (!same_type(written[i], inferred[i]))
        report(who, "output " + std::to_string(i) + " (" + value_str(n.outputs[i]) + ") is written " +
                        written[i].str() + ", the shape rule gives " + inferred[i].str() +
                        " from inputs " + types_str(in_types));
  }

  const Graph& graph_;
  std::set<const Value*> anywhere_;  // every value some node or input defines
  std::set<const Value*> defined_;   // defined so far, in order
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> verify_graph(const Graph& graph) {
  // Shape rules compare symbolic dims; judging a graph is no trace decision to record.
  GuardSinkScope no_guards(nullptr);
  return Verifier(graph).run();
}

void verify_graph_or_throw(const Graph& graph) {
  std::vector<std::string> problems = verify_graph(graph);
  if (problems.empty()) return;
  std::string msg = "graph is not valid (" + std::to_string(problems.size()) +
                    (problems.size() == 1 ? " problem):" : " problems):");
  for (const std::string& p : problems) msg += "\n  " + p;
  throw Error(msg);
}

}  // namespace kiln
