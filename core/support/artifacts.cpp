// ArtifactSet and the per-thread scope that lends one to the compiles inside it.
#include "core/support/artifacts.h"

#include <algorithm>

namespace kiln {
namespace {

thread_local ArtifactSet* t_record = nullptr;
thread_local const ArtifactSet* t_provide = nullptr;

}  // namespace

void ArtifactSet::add(Artifact artifact) {
  std::lock_guard lock(mutex_);
  for (const Artifact& a : artifacts_)
    if (a.kind == artifact.kind && a.members == artifact.members) return;
  artifacts_.push_back(std::move(artifact));
}

std::vector<Artifact> ArtifactSet::all() const {
  std::lock_guard lock(mutex_);
  return artifacts_;
}

size_t ArtifactSet::size() const {
  std::lock_guard lock(mutex_);
  return artifacts_.size();
}

std::optional<ArtifactSet::Found> ArtifactSet::find(const std::string& kind, const std::string& member) const {
  std::lock_guard lock(mutex_);
  for (const Artifact& a : artifacts_) {
    if (a.kind != kind) continue;
    auto it = std::find(a.members.begin(), a.members.end(), member);
    if (it != a.members.end()) return Found{&a, size_t(it - a.members.begin())};
  }
  return std::nullopt;
}

ArtifactScope::ArtifactScope(ArtifactSet* record, const ArtifactSet* provide)
    : old_record_(t_record), old_provide_(t_provide) {
  t_record = record;
  t_provide = provide;
}

ArtifactScope::~ArtifactScope() {
  t_record = old_record_;
  t_provide = old_provide_;
}

ArtifactSet* recording_artifacts() { return t_record; }
const ArtifactSet* provided_artifacts() { return t_provide; }

}  // namespace kiln
