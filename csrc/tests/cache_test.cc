// Conformance suite for the persistent compile cache (csrc/cache): key parts,
// entry round trip, hostile entries (truncated, random bytes, wrong key,
// flipped bits), concurrent writers in two forked processes, and a program
// compiled, stored, loaded and run on the CPU plugin.
//
// The fork tests come first in this file and touch no PJRT client: forking a
// process that runs the plugin's thread pools is not safe.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cache/key.h"
#include "tests/test_plugin.h"
#include "cache/sha256.h"
#include "cache/store.h"
#include "pjrt/compile_options.h"
#include "pjrt/pjrt.h"

namespace ttpu::cache {
namespace {

namespace fs = std::filesystem;

using ttpu::testing::plugin_path;

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ttpu-cache-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, ec);
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A key like KeyBuilder's, without reading the plugin (fork-safe, fast).
Key test_key(const std::string& program, const std::string& cpu = "sha256:00") {
  return Key({{"program", program},
              {"compile_options", "sha256:11"},
              {"plugin", "path=/x.so size=1 mtime_ns=2 sample_sha256=33"},
              {"pjrt_api", "0.90"},
              {"cpu", cpu},
              {"torchtpu", "0.1.0"}});
}

std::string payload_for(int i) {
  // Tens of KiB, like a small XLA:CPU executable, so writes are not atomic by luck.
  std::string p(20000 + 97 * i, '\0');
  for (size_t j = 0; j < p.size(); ++j) p[j] = static_cast<char>((j * 31 + i) & 0xFF);
  return p;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// --------------------------------------------------------------- concurrency

// Two processes fill one directory with the same 40 keys at once, each also
// reading every key after each write: every read is a hit or absent, never a
// corrupt entry, and the directory ends with 40 valid entries and no temp files.
TEST(DiskStoreConcurrency, TwoProcessesFillOneDirectory) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/cache";
  constexpr int kKeys = 40;
  constexpr int kRounds = 3;
  std::vector<pid_t> children;
  for (int child = 0; child < 2; ++child) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int bad = 0;
      try {
        DiskStore store(dir);  // both create the directory: must not race
        for (int round = 0; round < kRounds; ++round) {
          for (int k = 0; k < kKeys; ++k) {
            int i = child == 0 ? k : kKeys - 1 - k;  // opposite orders collide mid-way
            Key key = test_key("p" + std::to_string(i));
            if (!store.store(key, payload_for(i)).empty()) ++bad;
            for (int j = 0; j < kKeys; ++j) {
              LoadResult r = store.load(test_key("p" + std::to_string(j)));
              if (r.status == LoadStatus::kHit && r.payload != payload_for(j)) ++bad;
              if (r.status == LoadStatus::kCorrupt || r.status == LoadStatus::kForeign) ++bad;
            }
          }
        }
      } catch (...) {
        bad = 1000;
      }
      ::_exit(bad == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child saw a bad entry";
  }
  DiskStore store(dir);
  for (int i = 0; i < kKeys; ++i) {
    LoadResult r = store.load(test_key("p" + std::to_string(i)));
    ASSERT_EQ(r.status, LoadStatus::kHit) << r.reason;
    EXPECT_EQ(r.payload, payload_for(i));
  }
  EXPECT_EQ(store.info().entries, kKeys);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, kKeys) << "temp files were left behind";
}

// ---------------------------------------------------------------- hashing, keys

TEST(Sha256, KnownVectors) {
  // FIPS 180-2 appendix B.1 and the empty string.
  EXPECT_EQ(to_hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 h;
  h.update("a");
  h.update("bc");
  EXPECT_EQ(h.finish(), sha256("abc"));
}

TEST(Key, PartsAreNamedAndOrdered) {
  KeyBuilder b(plugin_path(), 0, 90, pjrt::compile_options_bytes());
  Key k = b.key("module @m {}");
  std::vector<std::string> names;
  for (const auto& p : k.parts()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"program", "compile_options", "plugin", "pjrt_api",
                                             "cpu", "torchtpu", "xla_env"}));
  EXPECT_EQ(k.parts()[0].value, "sha256:" + to_hex(sha256("module @m {}")));
  EXPECT_EQ(k.parts()[6].value, xla_environment());
  EXPECT_EQ(k.parts()[3].value, "0.90");
  EXPECT_EQ(k.parts()[5].value, torchtpu_version());
  EXPECT_NE(k.parts()[2].value.find("path=" + plugin_path()), std::string::npos);
  EXPECT_EQ(k.digest().size(), 64u);
  EXPECT_EQ(k.digest(), b.key("module @m {}").digest());
}

TEST(Key, EveryPartChangesTheDigest) {
  KeyBuilder b(plugin_path(), 0, 90, pjrt::compile_options_bytes());
  const std::string base = b.key("a").digest();
  EXPECT_NE(base, b.key("b").digest());
  EXPECT_NE(base,
            KeyBuilder(plugin_path(), 0, 91, pjrt::compile_options_bytes()).key("a").digest());
  EXPECT_NE(base, KeyBuilder(plugin_path(), 0, 90, "other options").key("a").digest());
  EXPECT_NE(test_key("a", "sha256:00").digest(), test_key("a", "sha256:01").digest());
  // Length prefixes: moving a byte between name and value is a different key.
  EXPECT_NE(Key(std::vector<KeyPart>{{"ab", "c"}}).digest(),
            Key(std::vector<KeyPart>{{"a", "bc"}}).digest());
}

TEST(Key, XlaEnvironmentNamesTheFlagsSet) {
  const char* saved_flags = std::getenv("XLA_FLAGS");
  const char* saved_libtpu = std::getenv("LIBTPU_INIT_ARGS");
  const std::string flags = saved_flags ? saved_flags : "";
  const std::string libtpu = saved_libtpu ? saved_libtpu : "";
  ::unsetenv("XLA_FLAGS");
  ::unsetenv("LIBTPU_INIT_ARGS");
  EXPECT_EQ(xla_environment(), "(none)");
  ::setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true", 1);
  EXPECT_EQ(xla_environment(), "XLA_FLAGS=--xla_cpu_enable_fast_math=true");
  ::setenv("LIBTPU_INIT_ARGS", "--x=1", 1);
  EXPECT_EQ(xla_environment(), "XLA_FLAGS=--xla_cpu_enable_fast_math=true LIBTPU_INIT_ARGS=--x=1");
  // An empty value is still a value the plugin reads: not "(none)".
  ::setenv("XLA_FLAGS", "", 1);
  ::unsetenv("LIBTPU_INIT_ARGS");
  EXPECT_EQ(xla_environment(), "XLA_FLAGS=");
  if (saved_flags)
    ::setenv("XLA_FLAGS", flags.c_str(), 1);
  else
    ::unsetenv("XLA_FLAGS");
  if (saved_libtpu)
    ::setenv("LIBTPU_INIT_ARGS", libtpu.c_str(), 1);
  else
    ::unsetenv("LIBTPU_INIT_ARGS");
}

TEST(Key, DescribeDifferenceNamesThePart) {
  Key mine = test_key("p", "sha256:aa");
  Key theirs = test_key("p", "sha256:bb");
  const std::string d = mine.describe_difference(theirs.parts());
  EXPECT_NE(d.find("cpu: sha256:bb (entry) vs sha256:aa (this process)"), std::string::npos) << d;
  EXPECT_EQ(d.find("program"), std::string::npos) << d;
  EXPECT_EQ(mine.describe_difference(mine.parts()), "");
}

TEST(Key, HostCpuFeaturesAreHashed) {
  // Linux with /proc: the flags line is read; identical on every call.
  EXPECT_EQ(host_cpu_features().rfind("sha256:", 0), 0u) << host_cpu_features();
  EXPECT_EQ(host_cpu_features(), host_cpu_features());
}

TEST(Key, PluginIdentityIsCheapAndStable) {
  // Sampled identity vs a full SHA-256 of the file: the numbers behind the
  // sampling comment in key.cc (the file is in the page cache by now).
  const std::string path = plugin_path();
  auto t0 = std::chrono::steady_clock::now();
  const std::string id = plugin_identity(path);
  auto t1 = std::chrono::steady_clock::now();
  Sha256 full;
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    full.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  full.finish();
  auto t2 = std::chrono::steady_clock::now();
  const double sampled_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double full_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  std::cout << "[ measure  ] plugin identity: sampled " << sampled_ms << " ms, full SHA-256 "
            << full_ms << " ms (" << fs::file_size(path) << " bytes)\n";
  EXPECT_LT(sampled_ms, 500.0);
  EXPECT_EQ(plugin_identity(path), id);
  EXPECT_NE(id.find("size=" + std::to_string(fs::file_size(path))), std::string::npos);
  EXPECT_THROW(plugin_identity("/nonexistent/plugin.so"), std::runtime_error);
}

TEST(Key, PluginIdentitySeesAChangedByte) {
  TempDir tmp;
  const std::string a = tmp.path() + "/a.so";
  std::string bytes(3 << 20, 'x');
  write_file(a, bytes);
  const std::string before = plugin_identity(a);
  bytes[bytes.size() - 10] = 'y';  // in the sampled last MiB
  write_file(a, bytes);
  const std::string after = plugin_identity(a);
  EXPECT_NE(before.substr(before.find("sample_sha256")), after.substr(after.find("sample_sha256")));
}

// --------------------------------------------------------------------- store

TEST(DiskStore, RoundTripAndOwnerOnlyDirectory) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/nested/cache";
  DiskStore store(dir);
  struct stat st{};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((tmp.path() + "/nested").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  Key key = test_key("p");
  EXPECT_EQ(store.load(key).status, LoadStatus::kAbsent);
  EXPECT_EQ(store.store(key, payload_for(1)), "");
  LoadResult r = store.load(key);
  ASSERT_EQ(r.status, LoadStatus::kHit) << r.reason;
  EXPECT_EQ(r.payload, payload_for(1));
  ASSERT_EQ(::stat(store.entry_path(key).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  StoreInfo info = store.info();
  EXPECT_EQ(info.dir, dir);
  EXPECT_EQ(info.entries, 1);
  EXPECT_GT(info.bytes, static_cast<int64_t>(payload_for(1).size()));
  // An empty payload is a valid entry too.
  EXPECT_EQ(store.store(test_key("empty"), ""), "");
  EXPECT_EQ(store.load(test_key("empty")).status, LoadStatus::kHit);
}

TEST(DiskStore, RefusesADirectoryOthersCanWrite) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/shared";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  try {
    DiskStore store(dir);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 700"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);  // readable by others is fine
  EXPECT_NO_THROW(DiskStore{dir});
  write_file(tmp.path() + "/file", "x");
  EXPECT_THROW(DiskStore(tmp.path() + "/file"), StoreError);
}

TEST(DiskStore, EveryTruncationIsRejected) {
  Key key = test_key("p");
  const std::string entry = encode_entry(key, payload_for(0).substr(0, 300));
  ASSERT_EQ(decode_entry(entry, key).status, LoadStatus::kHit);
  for (size_t n = 0; n < entry.size(); ++n) {
    LoadResult r = decode_entry(std::string_view(entry).substr(0, n), key);
    ASSERT_NE(r.status, LoadStatus::kHit) << "prefix of " << n << " bytes was accepted";
    ASSERT_FALSE(r.reason.empty());
  }
  EXPECT_EQ(decode_entry(entry + "x", key).status, LoadStatus::kCorrupt);  // trailing bytes
}

TEST(DiskStore, EveryFlippedByteIsRejected) {
  Key key = test_key("p");
  const std::string entry = encode_entry(key, payload_for(0).substr(0, 200));
  for (size_t i = 0; i < entry.size(); ++i) {
    std::string bad = entry;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    ASSERT_NE(decode_entry(bad, key).status, LoadStatus::kHit) << "flip at byte " << i;
  }
}

TEST(DiskStore, RandomBytesAreRejected) {
  Key key = test_key("p");
  std::mt19937_64 rng(0);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(rng() % 4096, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    if (trial % 2 == 0 && bytes.size() >= 8) bytes.replace(0, 8, std::string("TTPUEXE\0", 8));
    ASSERT_NE(decode_entry(bytes, key).status, LoadStatus::kHit);
  }
  // A header asking for 2^32 - 1 parts or a 4 GiB part must not allocate it.
  std::string huge("TTPUEXE\0", 8);
  huge += std::string("\x01\x00\x00\x00\xff\xff\xff\xff", 8);
  EXPECT_EQ(decode_entry(huge, key).status, LoadStatus::kCorrupt);
  huge = std::string("TTPUEXE\0", 8) +
         std::string("\x01\x00\x00\x00\x01\x00\x00\x00\xff\xff\xff\x7f", 12);
  EXPECT_EQ(decode_entry(huge, key).status, LoadStatus::kCorrupt);
}

TEST(DiskStore, HostileFilesAreSurvivedAndOverwritten) {
  TempDir tmp;
  DiskStore store(tmp.path());
  Key key = test_key("p");
  Key other = test_key("p", "sha256:ff");  // another host's CPU
  const std::string path = store.entry_path(key);

  write_file(path, encode_entry(other, payload_for(2)));  // copied from another host
  LoadResult r = store.load(key);
  EXPECT_EQ(r.status, LoadStatus::kForeign);
  EXPECT_NE(r.reason.find("cpu: sha256:ff (entry) vs sha256:00 (this process)"), std::string::npos)
      << r.reason;

  const std::string good = encode_entry(key, payload_for(2));
  write_file(path, good.substr(0, good.size() / 2));
  EXPECT_EQ(store.load(key).status, LoadStatus::kCorrupt);
  write_file(path, "garbage");
  EXPECT_EQ(store.load(key).status, LoadStatus::kCorrupt);
  std::string future = good;
  future[8] = 99;  // a format from a newer torchtpu
  write_file(path, future);
  EXPECT_EQ(store.load(key).status, LoadStatus::kForeign);
  fs::remove(path);
  fs::create_directory(path);  // not even a file
  EXPECT_EQ(store.load(key).status, LoadStatus::kCorrupt);
  fs::remove(path);
  fs::create_symlink("/etc/passwd", path);  // entries are never followed
  EXPECT_EQ(store.load(key).status, LoadStatus::kCorrupt);

  EXPECT_EQ(store.store(key, payload_for(2)), "");  // replaces the symlink itself
  r = store.load(key);
  ASSERT_EQ(r.status, LoadStatus::kHit) << r.reason;
  EXPECT_EQ(r.payload, payload_for(2));
}

TEST(DiskStore, StoreFailureIsReportedNotThrown) {
  TempDir tmp;
  DiskStore store(tmp.path() + "/gone");
  fs::remove_all(tmp.path() + "/gone");  // e.g. a user's rm -rf while we run
  EXPECT_NE(store.store(test_key("p"), "x"), "");
  EXPECT_EQ(store.load(test_key("p")).status, LoadStatus::kAbsent);
  EXPECT_EQ(store.info().entries, 0);
  EXPECT_EQ(store.clear(), 0);
}

TEST(DiskStore, ClearRemovesEntriesAndStaleTempFilesOnly) {
  TempDir tmp;
  DiskStore store(tmp.path());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(store.store(test_key("p" + std::to_string(i)), "x"), "");
  const std::string digest = test_key("q").digest();
  const std::string stale = tmp.path() + "/." + digest + ".tmp.abcdef";
  const std::string fresh = tmp.path() + "/." + digest + ".tmp.ghijkl";
  write_file(stale, "partial");
  write_file(fresh, "partial");
  struct timeval old[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(::utimes(stale.c_str(), old), 0);
  write_file(tmp.path() + "/notes.txt", "the user's own file");
  EXPECT_EQ(store.info().entries, 3);
  EXPECT_EQ(store.clear(), 3);
  EXPECT_EQ(store.info().entries, 0);
  EXPECT_EQ(store.info().bytes, 0);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));  // may be a writer in progress
  EXPECT_TRUE(fs::exists(tmp.path() + "/notes.txt"));
}

TEST(DiskStore, DirectoryFromEnvironment) {
  auto with_env = [](const char* cache, const char* dir, const char* xdg, const char* home) {
    auto set = [](const char* name, const char* v) {
      if (v)
        ::setenv(name, v, 1);
      else
        ::unsetenv(name);
    };
    set("TORCHTPU_CACHE", cache);
    set("TORCHTPU_CACHE_DIR", dir);
    set("XDG_CACHE_HOME", xdg);
    set("HOME", home);
    return cache_dir_from_env();
  };
  const char* home = std::getenv("HOME");
  const std::string saved_home = home ? home : "";
  EXPECT_EQ(with_env(nullptr, "/c", nullptr, "/h"), "/c");
  EXPECT_EQ(with_env(nullptr, "", nullptr, "/h"), "");  // set but empty: disabled
  EXPECT_EQ(with_env("0", "/c", nullptr, "/h"), "");
  EXPECT_EQ(with_env("off", nullptr, nullptr, "/h"), "");
  EXPECT_EQ(with_env("1", nullptr, nullptr, "/h"), "/h/.cache/torchtpu");
  EXPECT_EQ(with_env(nullptr, nullptr, "/x", "/h"), "/x/torchtpu");
  EXPECT_EQ(with_env(nullptr, nullptr, "relative", "/h"), "/h/.cache/torchtpu");
  with_env(nullptr, nullptr, nullptr, saved_home.empty() ? nullptr : saved_home.c_str());
}

// ------------------------------------------------------ with the CPU plugin

constexpr char kAffine[] = R"(module @m {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.multiply %a, %b : tensor<4xf32>
    %1 = stablehlo.add %0, %a : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
})";

std::shared_ptr<pjrt::Client> client() {
  // Two devices, so a loaded program is also run on a device other than 0.
  static std::shared_ptr<pjrt::Client> c = pjrt::load_plugin(plugin_path())->create_client(2);
  return c;
}

std::vector<float> run(pjrt::Executable& exe, int device) {
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, out(4);
  auto ba = client()->buffer_from_host(a.data(), pjrt::ElementType::kF32, {4}, device);
  auto bb = client()->buffer_from_host(b.data(), pjrt::ElementType::kF32, {4}, device);
  auto outs = exe.execute({ba.get(), bb.get()}, device);
  outs.at(0)->to_host(out.data(), 16);
  return out;
}

TEST(PluginRoundTrip, StoredExecutableLoadsAndRuns) {
  TempDir tmp;
  DiskStore store(tmp.path());
  auto plugin = pjrt::load_plugin(plugin_path());
  KeyBuilder keys(plugin->path(), plugin->api_major(), plugin->api_minor(),
                  pjrt::compile_options_bytes());
  Key key = keys.key(kAffine);

  auto t0 = std::chrono::steady_clock::now();
  auto exe = client()->compile(kAffine);
  auto t1 = std::chrono::steady_clock::now();
  const std::string bytes = exe->serialize();
  ASSERT_EQ(store.store(key, bytes), "");
  auto t2 = std::chrono::steady_clock::now();
  LoadResult r = store.load(key);
  ASSERT_EQ(r.status, LoadStatus::kHit) << r.reason;
  auto loaded = client()->deserialize(r.payload);
  auto t3 = std::chrono::steady_clock::now();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::cout << "[ measure  ] compile " << ms(t0, t1) << " ms; serialize+store " << ms(t1, t2)
            << " ms; load+deserialize " << ms(t2, t3) << " ms; " << bytes.size() << " bytes\n";

  const std::vector<float> want = {11, 42, 93, 164};
  EXPECT_EQ(run(*loaded, 0), want);
  EXPECT_EQ(run(*loaded, 1), want);
  EXPECT_EQ(loaded->num_outputs(), 1);
}

TEST(PluginRoundTrip, GarbageExecutableBytesAreAnError) {
  // What a checksum-valid but meaningless payload would meet: an error, not an abort.
  EXPECT_THROW(client()->deserialize("definitely not an executable"), pjrt::PjrtError);
}

}  // namespace
}  // namespace ttpu::cache
