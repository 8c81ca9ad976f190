// The on-disk compile cache (KILN_CACHE_DIR, default ~/.cache/kiln, "off" disables): versioned,
// checksummed entries written atomically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Bumped whenever the entry layout (or what a payload means) changes; older entries then miss.
inline constexpr uint32_t kDiskCacheVersion = 1;

class DiskCache {
 public:
  // Disabled (every load misses, stores do nothing).
  DiskCache() = default;
  // Entries under `dir`, created on first store.
  explicit DiskCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  // KILN_CACHE_DIR, else $HOME/.cache/kiln; disabled for "off" or when neither is set.
  static DiskCache from_env();

  bool enabled() const { return !dir_.empty(); }
  const std::filesystem::path& dir() const { return dir_; }
  // Where the entry for (kind, key) lives: dir/kind/<hash of key>.bin.
  std::filesystem::path path_for(std::string_view kind, std::string_view key) const;

  // The payload stored for (kind, key). A missing entry misses (debug log says why); a truncated,
  // corrupt, stale-version or colliding entry is reported with a warning, removed and misses.
  std::optional<std::vector<uint8_t>> load(std::string_view kind, std::string_view key) const;
  // Writes a temp file next to the entry and renames it over, so readers never see half an entry.
  // Failures (read-only disk, ...) are logged and ignored: the cache is an optimization.
  void store(std::string_view kind, std::string_view key, std::span<const uint8_t> payload) const;

 private:
  std::filesystem::path dir_;
};

// 64-bit FNV-1a, as 16 hex digits; stable across runs and builds (std::hash is not).
uint64_t stable_hash(std::string_view data);
std::string stable_hash_hex(std::string_view data);


}  // namespace kiln
