// Compiled code carried with a program from one process to another, outside the disk cache: what an
// exported package holds so that it runs where no compiler does (core/onnx/package.h).
//
// A backend that builds code asks recording_artifacts() for a set to add what it built to, and
// provided_artifacts() for code built before, which it uses instead of building. Both are set for
// the current thread by an ArtifactScope around a compile.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct Artifact {
  std::string kind;                  // what the bytes are, e.g. "cpu-so": a shared object of kernels
  std::string target;                // what the bytes need to run, e.g. the CPU features they use
  std::vector<std::string> members;  // what they were built from: stable_hash_hex of each source
  std::vector<uint8_t> bytes;
};

class ArtifactSet {
 public:
  // Adds `artifact` unless one of its kind already has the same members.
  void add(Artifact artifact);
  std::vector<Artifact> all() const;
  size_t size() const;

  // The artifact of `kind` built from a source whose stable_hash_hex is `member`, and the member's
  // index in it. The pointer stays valid until the set is added to.
  struct Found {
    const Artifact* artifact = nullptr;
    size_t index = 0;
  };
  std::optional<Found> find(const std::string& kind, const std::string& member) const;

 private:
  mutable std::mutex mutex_;
  std::vector<Artifact> artifacts_;
};

// While alive, compiles on this thread add what they build to `record` (when not null) and take
// what `provide` holds (when not null) instead of building it. Scopes nest; each restores the one
// before.
class ArtifactScope {
 public:
  ArtifactScope(ArtifactSet* record, const ArtifactSet* provide);
  ~ArtifactScope();
  ArtifactScope(const ArtifactScope&) = delete;
  ArtifactScope& operator=(const ArtifactScope&) = delete;

 private:
  ArtifactSet* old_record_;
  const ArtifactSet* old_provide_;
};

ArtifactSet* recording_artifacts();
const ArtifactSet* provided_artifacts();

}  // namespace kiln
