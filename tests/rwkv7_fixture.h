#ifndef LINSERVE_TESTS_RWKV7_FIXTURE_H_
#define LINSERVE_TESTS_RWKV7_FIXTURE_H_

// The RWKV-7 fixtures of ../shared/data/rwkv7 (beside the checkout; the
// environment variable LINSERVE_RWKV7_FIXTURES names another directory). The
// weights are read from there, never copied into the project. Their card:
// tests/engine/RWKV7_FIXTURE.md.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace linserve {

inline std::string Rwkv7FixturePath(const std::string& file) {
  const char* dir = std::getenv("LINSERVE_RWKV7_FIXTURES");
  const std::filesystem::path base =
      dir != nullptr ? std::filesystem::path(dir)
                     : std::filesystem::path(LINSERVE_SOURCE_DIR) / ".." / "shared" / "data" / "rwkv7";
  return (base / file).lexically_normal().string();
}

// Makes `dir` a model directory of the tiny fixture: a link to its weights
// (`weights`: tiny-rwkv7-fp32.pth, tiny-rwkv7-bf16.pth or
// tiny-rwkv7-fp32.safetensors, linked as model.safetensors) and a config.json
// declaring the byte tokenizer. Returns `dir`.
inline std::string WriteTinyRwkv7Dir(const std::string& dir,
                                     const std::string& weights = "tiny-rwkv7-fp32.pth") {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const std::string link = weights.size() > 12 && weights.substr(weights.size() - 12) == ".safetensors"
                               ? "model.safetensors"
                               : weights;
  fs::remove(fs::path(dir) / link);
  fs::create_symlink(Rwkv7FixturePath(weights), fs::path(dir) / link);
  std::ofstream(fs::path(dir) / "config.json")
      << R"({"architecture": "rwkv7", "tokenizer": {"type": "byte"}})";
  return dir;
}

}  // namespace linserve

#endif  // LINSERVE_TESTS_RWKV7_FIXTURE_H_
