#ifndef LINSERVE_TESTS_ENGINE_TEST_MODELS_H_
#define LINSERVE_TESTS_ENGINE_TEST_MODELS_H_

// Small configurations covering every attention kind and option, shared by
// the engine tests.

#include <ostream>
#include <string>
#include <vector>

#include "engine/base/model_config.h"

namespace linserve {

struct NamedConfig {
  std::string name;
  ModelConfig config;
};

// Tiny models: 2 layers, 2 heads of 8, chunk size 8 (so 3L+5 = 29 tokens),
// vq window 5 and 16 codes, 4 compressed slots.
inline std::vector<NamedConfig> AllKindConfigs() {
  auto make = [](AttentionKind kind) {
    ModelConfig c;
    c.d_model = 32;
    c.n_layers = 2;
    c.n_heads = 2;
    c.head_dim = 8;
    c.mlp_hidden = 48;
    c.attention.kind = kind;
    c.attention.chunk_size = 8;
    c.attention.codebook_size = 16;
    c.attention.window = 5;
    c.attention.slots = 4;
    return c;
  };
  std::vector<NamedConfig> out;
  for (AttentionKind kind :
       {AttentionKind::kSoftmax, AttentionKind::kLinearElu, AttentionKind::kLinearSoftmax,
        AttentionKind::kLinearCosine, AttentionKind::kVq, AttentionKind::kCompressed}) {
    out.push_back({AttentionKindName(kind), make(kind)});
    if (IsLinearKind(kind) || kind == AttentionKind::kSoftmax) {
      ModelConfig c = make(kind);
      c.attention.rope = true;
      out.push_back({std::string(AttentionKindName(kind)) + "_rope", c});
    }
    {
      ModelConfig c = make(kind);
      c.attention.token_shift = true;
      out.push_back({std::string(AttentionKindName(kind)) + "_shift", c});
    }
    if (IsSoftmaxFamilyKind(kind)) {
      ModelConfig c = make(kind);
      c.attention.scale = AttentionScale::kEntropyInvariant;
      out.push_back({std::string(AttentionKindName(kind)) + "_entropy", c});
    }
  }
  return out;
}

// Test names print as the configuration's name, not its bytes.
inline void PrintTo(const NamedConfig& config, std::ostream* os) { *os << config.name; }

inline ModelConfig ConfigNamed(const std::string& name) {
  for (const NamedConfig& c : AllKindConfigs()) {
    if (c.name == name) return c.config;
  }
  return {};
}

}  // namespace linserve

#endif  // LINSERVE_TESTS_ENGINE_TEST_MODELS_H_
