// Thread-local module scope stack.
#include "core/frontend/scope.h"

#include <vector>

namespace kiln {
namespace {
thread_local std::vector<std::string> g_scopes;
const std::string kNoScope;
}  // namespace

const std::string& current_scope() { return g_scopes.empty() ? kNoScope : g_scopes.back(); }

ScopeGuard::ScopeGuard(std::string path) { g_scopes.push_back(std::move(path)); }
ScopeGuard::~ScopeGuard() { g_scopes.pop_back(); }

}  // namespace kiln
