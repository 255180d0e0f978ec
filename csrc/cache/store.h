// The on-disk store of compiled executables, one file per key.
//
// Layout of an entry (all integers little-endian):
//   magic            8 bytes "TTPUEXE\0"
//   format           u32, kFormatVersion
//   part count       u32
//   parts            per part: u32 length + name, u32 length + value (Key::parts())
//   payload length   u64
//   payload SHA-256  32 bytes
//   payload          the bytes of pjrt::Executable::serialize()
// An entry is used only if every field checks out: magic, format, the parts equal
// the wanted key's, the file ends exactly after the payload, the checksum
// matches. Anything else is reported (kCorrupt / kForeign) and the caller
// recompiles and overwrites it; nothing here crashes on hostile bytes.
//
// Concurrency: writers write a hidden temp file in the same directory, fsync it
// and rename() it over the entry, so a reader (this or another process) sees the
// old entry or the new one, never a partial file; two writers of the same key
// both succeed and the last rename wins (their payloads are equivalent).
//
// Trust: entries are native code this process will run. The directory is created
// 0700 and refused (the store cannot be opened) when another user owns it or
// others may write to it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "cache/key.h"

namespace ttpu::cache {

constexpr uint32_t kFormatVersion = 1;

// The directory cannot be created or is not safe to load code from.
class StoreError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class LoadStatus {
  kHit,      // payload is valid
  kAbsent,   // no entry for this key
  kCorrupt,  // unreadable, truncated, bad magic/format/checksum
  kForeign,  // well-formed, but written for a different key
};

struct LoadResult {
  LoadStatus status = LoadStatus::kAbsent;
  std::string payload;  // set for kHit
  std::string reason;   // why it was not a hit (for a log line)
};

struct StoreInfo {
  std::string dir;
  int64_t entries = 0;  // complete entry files
  int64_t bytes = 0;    // their total size on disk (headers included)
};

// The cache directory from the environment, or "" when the cache is disabled:
// TORCHTPU_CACHE=0 (also "false", "off", "no") disables; TORCHTPU_CACHE_DIR
// names the directory ("" disables); otherwise $XDG_CACHE_HOME/torchtpu if that
// is an absolute path, else ~/.cache/torchtpu.
std::string cache_dir_from_env();

// Entry bytes for (key, payload), and the check of entry bytes against a key.
// Exposed for tests.
std::string encode_entry(const Key& key, std::string_view payload);
LoadResult decode_entry(std::string_view bytes, const Key& key);

class DiskStore {
 public:
  // Creates `dir` (and missing parents) with mode 0700. Throws StoreError naming
  // the directory and the fix if it cannot be created, is not a directory, is
  // owned by another user or is writable by group or others.
  explicit DiskStore(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string entry_path(const Key& key) const;

  // Never throws for I/O or content errors: they come back as a status.
  LoadResult load(const Key& key) const;
  // Writes the entry atomically (temp file, fsync, rename). Returns "" on
  // success, else what failed (disk full, permissions); never throws for I/O.
  std::string store(const Key& key, std::string_view payload) const;

  // Counts entry files (temp files of writers in progress are not entries).
  StoreInfo info() const;
  // Removes every entry, and temp files older than ten minutes (left by a crashed
  // writer; younger ones may belong to a writer in progress). Returns the number
  // of entries removed. Files that are not ours are left alone.
  int64_t clear() const;

 private:
  std::string dir_;  // absolute
};

}  // namespace ttpu::cache
