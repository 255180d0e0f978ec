#include "cache/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "cache/sha256.h"
#include "settings/settings.h"

namespace ttpu::cache {
namespace {

constexpr char kMagic[8] = {'T', 'T', 'P', 'U', 'E', 'X', 'E', '\0'};
constexpr std::string_view kEntrySuffix = ".ttpu";
constexpr std::string_view kTempMarker = ".tmp.";
// Bounds that keep hostile headers from asking for huge allocations.
constexpr uint32_t kMaxParts = 64;
constexpr uint32_t kMaxPartBytes = 1 << 16;
constexpr int64_t kMaxEntryBytes = int64_t{1} << 32;
constexpr time_t kStaleTempSeconds = 600;

std::string errno_text() { return std::strerror(errno); }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// Sequential reader over untrusted bytes: every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool u32(uint32_t& v) {
    if (left() < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(b_[pos_ + i])} << (8 * i);
    pos_ += 4;
    return true;
  }
  bool u64(uint64_t& v) {
    if (left() < 8) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(b_[pos_ + i])} << (8 * i);
    pos_ += 8;
    return true;
  }
  bool bytes(size_t n, std::string_view& out) {
    if (left() < n) return false;
    out = b_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool string(std::string& out) {
    uint32_t n = 0;
    std::string_view s;
    if (!u32(n) || n > kMaxPartBytes || !bytes(n, s)) return false;
    out.assign(s);
    return true;
  }
  size_t left() const { return b_.size() - pos_; }

 private:
  std::string_view b_;
  size_t pos_ = 0;
};

LoadResult fail(LoadStatus status, std::string reason) {
  LoadResult r;
  r.status = status;
  r.reason = std::move(reason);
  return r;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_hex_digest(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// "<64 hex digits>.ttpu": written by store(), nothing else.
bool is_entry_name(std::string_view name) {
  return name.size() == 64 + kEntrySuffix.size() && ends_with(name, kEntrySuffix) &&
         is_hex_digest(name.substr(0, 64));
}

// ".<64 hex digits>.tmp.XXXXXX": store()'s temp files (mkostemp's template).
bool is_temp_name(std::string_view name) {
  return name.size() == 1 + 64 + kTempMarker.size() + 6 && name[0] == '.' &&
         is_hex_digest(name.substr(1, 64)) && name.substr(65, kTempMarker.size()) == kTempMarker;
}

// mkdir -p with mode 0700 for every directory it creates.
void make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      throw StoreError("cannot create the torchtpu compile cache directory '" + prefix +
                       "': " + errno_text() +
                       " (set TORCHTPU_CACHE_DIR to a writable directory, or "
                       "TORCHTPU_CACHE=0 to disable the cache)");
    }
  }
}

std::string absolute(const std::string& dir) {
  if (!dir.empty() && dir[0] == '/') return dir;
  std::vector<char> buf(4096);
  if (::getcwd(buf.data(), buf.size()) == nullptr) {
    throw StoreError("cannot resolve the compile cache directory '" + dir + "': " + errno_text());
  }
  return std::string(buf.data()) + "/" + dir;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string cache_dir_from_env() {
  if (!settings::flag("TORCHTPU_CACHE", true)) return "";
  if (auto dir = settings::text("TORCHTPU_CACHE_DIR")) return *dir;  // "" disables
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::string(xdg) + "/torchtpu";
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] == '\0') {
    if (const passwd* pw = ::getpwuid(::geteuid())) home = pw->pw_dir;
  }
  if (home == nullptr || home[0] == '\0') return "";
  return std::string(home) + "/.cache/torchtpu";
}

std::string encode_entry(const Key& key, std::string_view payload) {
  std::string out(kMagic, sizeof(kMagic));
  put_u32(out, kFormatVersion);
  put_u32(out, static_cast<uint32_t>(key.parts().size()));
  for (const auto& p : key.parts()) {
    put_u32(out, static_cast<uint32_t>(p.name.size()));
    out += p.name;
    put_u32(out, static_cast<uint32_t>(p.value.size()));
    out += p.value;
  }
  put_u64(out, payload.size());
  out += sha256(payload);
  out += payload;
  return out;
}

LoadResult decode_entry(std::string_view bytes, const Key& key) {
  Reader r(bytes);
  std::string_view magic;
  if (!r.bytes(sizeof(kMagic), magic) || magic != std::string_view(kMagic, sizeof(kMagic))) {
    return fail(LoadStatus::kCorrupt, "not a torchtpu cache entry (bad magic)");
  }
  uint32_t format = 0, count = 0;
  if (!r.u32(format)) return fail(LoadStatus::kCorrupt, "truncated header");
  if (format != kFormatVersion) {
    return fail(LoadStatus::kForeign, "entry format " + std::to_string(format) + ", expected " +
                                          std::to_string(kFormatVersion));
  }
  if (!r.u32(count) || count > kMaxParts) return fail(LoadStatus::kCorrupt, "bad key part count");
  std::vector<KeyPart> parts(count);
  for (auto& p : parts) {
    if (!r.string(p.name) || !r.string(p.value)) {
      return fail(LoadStatus::kCorrupt, "truncated or oversized key part");
    }
  }
  if (parts != key.parts()) {
    return fail(LoadStatus::kForeign, "key differs: " + key.describe_difference(parts));
  }
  uint64_t size = 0;
  std::string_view checksum, payload;
  if (!r.u64(size) || !r.bytes(32, checksum)) return fail(LoadStatus::kCorrupt, "truncated header");
  if (size != r.left()) {
    return fail(LoadStatus::kCorrupt, "payload is " + std::to_string(r.left()) +
                                          " bytes, header says " + std::to_string(size));
  }
  r.bytes(size, payload);
  if (sha256(payload) != checksum) return fail(LoadStatus::kCorrupt, "payload checksum mismatch");
  LoadResult ok;
  ok.status = LoadStatus::kHit;
  ok.payload.assign(payload);
  return ok;
}

DiskStore::DiskStore(const std::string& dir) : dir_(absolute(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  make_dirs(dir_);
  struct stat st{};
  if (::stat(dir_.c_str(), &st) != 0) {
    throw StoreError("cannot stat the compile cache directory '" + dir_ + "': " + errno_text());
  }
  if (!S_ISDIR(st.st_mode)) {
    throw StoreError("the compile cache path '" + dir_ + "' is not a directory");
  }
  // Entries are native code this process runs: a directory others can write to
  // would let them run code as this user.
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw StoreError("the compile cache directory '" + dir_ +
                     "' is owned by another user or writable by group/others; the cache "
                     "loads native code from it, so it is not used (fix: chmod 700 it, "
                     "or set TORCHTPU_CACHE_DIR to a directory of your own)");
  }
}

std::string DiskStore::entry_path(const Key& key) const {
  return dir_ + "/" + key.digest() + std::string(kEntrySuffix);
}

LoadResult DiskStore::load(const Key& key) const {
  const std::string path = entry_path(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return fail(LoadStatus::kAbsent, "no entry");
    return fail(LoadStatus::kCorrupt, "cannot open " + path + ": " + errno_text());
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxEntryBytes) {
    ::close(fd);
    return fail(LoadStatus::kCorrupt, path + " is not a regular file of a plausible size");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  // A file replaced by rename() while we read keeps our inode, so a short read
  // means the file itself is short: decode_entry reports it as truncated.
  bytes.resize(got);
  return decode_entry(bytes, key);
}

std::string DiskStore::store(const Key& key, std::string_view payload) const {
  const std::string final_path = entry_path(key);
  std::string tmpl = dir_ + "/." + key.digest() + std::string(kTempMarker) + "XXXXXX";
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);  // creates the file 0600
  if (fd < 0) return "cannot create a temp file in " + dir_ + ": " + errno_text();
  const std::string entry = encode_entry(key, payload);
  std::string error;
  if (!write_all(fd, entry)) {
    error = "cannot write " + tmpl + ": " + errno_text();
  } else if (::fsync(fd) != 0) {
    error = "cannot fsync " + tmpl + ": " + errno_text();
  }
  if (::close(fd) != 0 && error.empty()) error = "cannot close " + tmpl + ": " + errno_text();
  if (error.empty() && ::rename(tmpl.c_str(), final_path.c_str()) != 0) {
    error = "cannot rename " + tmpl + " to " + final_path + ": " + errno_text();
  }
  if (!error.empty()) {
    ::unlink(tmpl.c_str());
    return error;
  }
  // Make the rename itself durable; a failure here loses only a cache entry.
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return "";
}

StoreInfo DiskStore::info() const {
  StoreInfo out;
  out.dir = dir_;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    if (!is_entry_name(e->d_name)) continue;
    struct stat st{};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;  // removed meanwhile, or not ours
    }
    ++out.entries;
    out.bytes += st.st_size;
  }
  ::closedir(d);
  return out;
}

int64_t DiskStore::clear() const {
  int64_t removed = 0;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return 0;
  const time_t now = std::time(nullptr);
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    bool entry = is_entry_name(name);
    if (!entry && !is_temp_name(name)) continue;
    struct stat st{};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!entry && now - st.st_mtime < kStaleTempSeconds) continue;
    if (::unlinkat(::dirfd(d), e->d_name, 0) == 0 && entry) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace ttpu::cache
