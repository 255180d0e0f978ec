// SHA-256 through OpenSSL's EVP interface (libcrypto): the one hash of this layer.
// A cryptographic hash, not a fast one, because a cache entry is native code
// that this process will run: its key digest and payload checksum must not
// collide by accident, and we implement no crypto ourselves.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ttpu::cache {

// Incremental SHA-256. Owns an EVP_MD_CTX (freed with the object).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // The 32-byte digest; the object may not be updated afterwards.
  std::string finish();

 private:
  void* ctx_;  // EVP_MD_CTX*, kept opaque so no OpenSSL header leaks out
};

std::string sha256(std::string_view data);   // 32 raw bytes
std::string to_hex(std::string_view bytes);  // lower-case, two digits per byte

}  // namespace ttpu::cache
