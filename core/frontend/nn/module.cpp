// nn::Module: registration, dotted names, state_dict load/save and device moves.
#include "core/frontend/nn/module.h"

#include <set>

namespace kiln::nn {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s;
}

// A new value for a parameter or buffer: a fresh leaf that requires grad when the old one did.
// The same tensor (a move to where it already is) stays as it is, so handles to it stay live.
void replace_keeping_requires_grad(Tensor& target, const Tensor& value) {
  if (value.impl_ptr() == target.impl_ptr()) return;
  bool requires_grad = target.requires_grad();
  target = value.detach();
  if (requires_grad) target.requires_grad_();
}

}  // namespace

void Module::set_name(std::string name) {
  if (parent_)
    throw Error("set_name('" + name + "') on " + describe() +
                ", which is a submodule: its name comes from register_module");
  name_ = std::move(name);
}

std::string Module::path() const {
  std::vector<const Module*> chain;
  for (const Module* m = this; m; m = m->parent_) chain.push_back(m);
  std::string s;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if ((*it)->name_.empty()) continue;
    if (!s.empty()) s += ".";
    s += (*it)->name_;
  }
  return s;
}

std::string Module::scope_name() const {
  std::string p = path();
  return p.empty() ? type_name() : p;
}

std::string Module::describe() const {
  std::string p = path();
  return p.empty() ? type_name() : type_name() + " '" + p + "'";
}

void Module::check_new_name(const std::string& name, std::string_view what) const {
  auto fail = [&](const std::string& why) {
    throw Error("register_" + std::string(what) + "('" + name + "') on " + describe() + ": " +
                why);
  };
  if (name.empty()) fail("the name is empty");
  if (name.find('.') != std::string::npos) fail("names may not contain '.'; nest modules instead");
  for (const Entry& e : entries_)
    if (e.name == name) fail("the name is already taken by a parameter or buffer");
  for (const auto& [child_name, child] : children_)
    if (child_name == name) fail("the name is already taken by a submodule");
}

Tensor& Module::add_entry(const std::string& name, Tensor value, bool is_buffer) {
  check_new_name(name, is_buffer ? "buffer" : "parameter");
  if (!value.defined())
    throw Error("register_" + std::string(is_buffer ? "buffer" : "parameter") + "('" + name +
                "') on " + describe() + ": the tensor is undefined");
  entries_.push_back({name, std::move(value), is_buffer});
  return entries_.back().tensor;
}

Tensor& Module::register_parameter(const std::string& name, Tensor value) {
  Tensor& param = add_entry(name, std::move(value), false);
  // A parameter is a leaf, as torch.nn.Parameter makes it: history from its initialization is cut.
  if (!param.is_traced() && is_floating(param.dtype())) {
    if (param.impl().grad_fn) param = param.detach();
    param.requires_grad_();
  }
  return param;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  return add_entry(name, std::move(value), true);
}

void Module::register_module(const std::string& name, Module& child) {
  check_new_name(name, "module");
  if (child.parent_)
    throw Error("register_module('" + name + "') on " + describe() + ": " + child.describe() +
                " already belongs to another module");
  if (&child == this) throw Error("register_module('" + name + "'): a module cannot hold itself");
  child.parent_ = this;
  child.name_ = name;
  children_.emplace_back(name, &child);
}

void Module::collect(const std::string& prefix, Select select,
                     std::vector<std::pair<std::string, Tensor*>>& out) {
  // PyTorch's state_dict order: a module's parameters, then its buffers, then each child's.
  if (select != Select::Buffers)
    for (Entry& e : entries_)
      if (!e.is_buffer) out.emplace_back(prefix + e.name, &e.tensor);
  if (select != Select::Parameters)
    for (Entry& e : entries_)
      if (e.is_buffer) out.emplace_back(prefix + e.name, &e.tensor);
  for (auto& [child_name, child] : children_) child->collect(prefix + child_name + ".", select, out);
}

std::vector<Tensor*> Module::parameters() {
  std::vector<Tensor*> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Module::named_parameters() {
  std::vector<std::pair<std::string, Tensor*>> out;
  collect("", Select::Parameters, out);
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Module::named_buffers() {
  std::vector<std::pair<std::string, Tensor*>> out;
  collect("", Select::Buffers, out);
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Module::named_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  collect("", Select::All, out);
  return out;
}

std::map<std::string, Tensor> Module::state_dict() {
  std::map<std::string, Tensor> out;
  for (auto& [key, tensor] : named_tensors()) out.emplace(key, *tensor);
  return out;
}

LoadResult Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  std::vector<std::pair<std::string, Tensor*>> targets = named_tensors();
  LoadResult result;
  std::vector<std::string> problems;
  std::set<std::string> known;
  for (const auto& [key, target] : targets) {
    known.insert(key);
    auto it = state.find(key);
    if (it == state.end()) {
      result.missing_keys.push_back(key);
      continue;
    }
    const Tensor& value = it->second;
    if (!value.defined()) {
      problems.push_back("'" + key + "' is an undefined tensor");
    } else if (value.is_traced()) {
      problems.push_back("'" + key + "' is a traced tensor; load eager values");
    } else if (value.sizes() != target->sizes()) {
      problems.push_back("size mismatch for '" + key + "': the state has " + value.type().str() +
                         ", the module expects " + target->type().str());
    }
  }
  for (const auto& [key, value] : state)
    if (!known.count(key)) result.unexpected_keys.push_back(key);
  if (strict && !result.missing_keys.empty())
    problems.push_back("missing keys: " + join(result.missing_keys));
  if (strict && !result.unexpected_keys.empty())
    problems.push_back("unexpected keys: " + join(result.unexpected_keys));
  if (!problems.empty()) {
    std::string message = "load_state_dict into " + describe() + " failed:";
    for (const std::string& p : problems) message += "\n  " + p;
    throw Error(message);
  }
  for (auto& [key, target] : targets) {
    auto it = state.find(key);
    if (it == state.end()) continue;
    // Cast where the data is, then move: the target device need not support every cast.
    replace_keeping_requires_grad(*target, it->second.to(target->dtype()).to(target->device()));
  }
  return result;
}

Module& Module::to(Device device) {
  for (auto& [key, tensor] : named_tensors()) replace_keeping_requires_grad(*tensor, tensor->to(device));
  return *this;
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [child_name, child] : children_) child->train(on);
  return *this;
}

}  // namespace kiln::nn
