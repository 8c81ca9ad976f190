// DiskCache: entry format (magic, version, key, payload size, checksum), atomic stores, and the
// checks that turn a damaged entry into a warned miss instead of a crash or a wrong kernel.
#include "core/support/disk_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/support/log.h"

namespace kiln {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'A', 'C', 'H'};

// magic, version, key length, payload length, checksum of key and payload; then key, payload.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t key_bytes;
  uint64_t payload_bytes;
  uint64_t checksum;
};

uint64_t checksum_of(std::string_view key, std::span<const uint8_t> payload) {
  uint64_t h = stable_hash(key);
  for (uint8_t b : payload) h = (h ^ b) * 1099511628211ull;
  return h;
}

}  // namespace

uint64_t stable_hash(std::string_view data) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string stable_hash_hex(std::string_view data) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(stable_hash(data)));
  return buf;
}

DiskCache DiskCache::from_env() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir && *dir) {
    if (std::string_view(dir) == "off") return DiskCache();
    return DiskCache(dir);
  }
  if (const char* home = std::getenv("HOME"); home && *home)
    return DiskCache(std::filesystem::path(home) / ".cache" / "kiln");
  return DiskCache();
}

std::filesystem::path DiskCache::path_for(std::string_view kind, std::string_view key) const {
  return dir_ / std::string(kind) / (stable_hash_hex(key) + ".bin");
}

std::optional<std::vector<uint8_t>> DiskCache::load(std::string_view kind, std::string_view key) const {
  if (!enabled()) return std::nullopt;
  const std::filesystem::path path = path_for(kind, key);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    log::debug("disk cache: miss for " + std::string(kind) + " entry " + path.string() + " (no file)");
    return std::nullopt;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto reject = [&](const std::string& why) -> std::optional<std::vector<uint8_t>> {
    log::warn("disk cache: ignoring " + std::string(kind) + " entry " + path.string() + ": " + why +
              "; it will be rebuilt");
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return std::nullopt;
  };
  Header h;
  if (bytes.size() < sizeof h) return reject("truncated header (" + std::to_string(bytes.size()) + " bytes)");
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return reject("not a kiln cache entry (bad magic)");
  if (h.version != kDiskCacheVersion)
    return reject("format version " + std::to_string(h.version) + ", this build writes " +
                  std::to_string(kDiskCacheVersion));
  if (bytes.size() != sizeof h + h.key_bytes + h.payload_bytes)
    return reject("size " + std::to_string(bytes.size()) + " bytes, header promises " +
                  std::to_string(sizeof h + h.key_bytes + h.payload_bytes));
  std::string_view stored_key(bytes.data() + sizeof h, h.key_bytes);
  std::vector<uint8_t> payload(bytes.begin() + sizeof h + h.key_bytes, bytes.end());
  if (checksum_of(stored_key, payload) != h.checksum) return reject("checksum mismatch (corrupt)");
  if (stored_key != key) {
    log::debug("disk cache: miss for " + std::string(kind) + " entry " + path.string() +
               " (hash collision with another key)");
    return std::nullopt;
  }
  log::debug("disk cache: hit for " + std::string(kind) + " entry " + path.string());
  return payload;
}

void DiskCache::store(std::string_view kind, std::string_view key, std::span<const uint8_t> payload) const {
  if (!enabled()) return;
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path path = path_for(kind, key);
  std::filesystem::path temp = path;
  temp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kDiskCacheVersion;
  h.key_bytes = uint32_t(key.size());
  h.payload_bytes = payload.size();
  h.checksum = checksum_of(key, payload);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    out.write(key.data(), std::streamsize(key.size()));
    out.write(reinterpret_cast<const char*>(payload.data()), std::streamsize(payload.size()));
    out.close();
    if (!out) {
      log::warn("disk cache: could not write " + temp.string() + "; continuing without caching it");
      std::filesystem::remove(temp, ec);
      return;
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    log::warn("disk cache: could not rename " + temp.string() + " to " + path.string() + ": " +
              ec.message());
    std::filesystem::remove(temp, ec);
  }
}


}  // namespace kiln
