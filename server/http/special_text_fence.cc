#include "server/http/special_text_fence.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace linserve {
namespace {

// U+E000 and U+E001 (private use) around the nonce.
constexpr char kPrivateUseA[] = "\xEE\x80\x80";
constexpr char kPrivateUseB[] = "\xEE\x80\x81";

}  // namespace

SpecialTextFence::SpecialTextFence(const std::vector<std::string>& special_texts) {
  for (const std::string& text : special_texts) {
    if (!text.empty()) texts_.push_back(text);
  }
  if (texts_.empty()) return;
  // At each position the longest text wins, as the tokenizer matches.
  std::sort(texts_.begin(), texts_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  absl::BitGen random;
  nonce_ = absl::StrCat(absl::Uniform<uint64_t>(random), absl::Uniform<uint64_t>(random));
  open_ = absl::StrCat(kPrivateUseA, nonce_, kPrivateUseB);
  close_ = absl::StrCat(kPrivateUseB, nonce_, kPrivateUseA);
}

std::string SpecialTextFence::FenceString(const std::string& s) const {
  std::string out;
  size_t copied = 0;
  for (size_t pos = 0; pos < s.size();) {
    const std::string_view rest = std::string_view(s).substr(pos);
    const auto found = std::find_if(texts_.begin(), texts_.end(), [&](const std::string& text) {
      return rest.substr(0, text.size()) == text;
    });
    if (found == texts_.end()) {
      ++pos;
      continue;
    }
    absl::StrAppend(&out, absl::string_view(s).substr(copied, pos - copied), open_, *found, close_);
    pos += found->size();
    copied = pos;
  }
  if (copied == 0) return s;
  out.append(s, copied, std::string::npos);
  return out;
}

RequestJson SpecialTextFence::Fence(const RequestJson& value) const {
  if (texts_.empty()) return value;
  if (value.is_string()) return FenceString(value.get_ref<const std::string&>());
  if (value.is_array()) {
    RequestJson out = RequestJson::array();
    for (const RequestJson& item : value) out.push_back(Fence(item));
    return out;
  }
  if (value.is_object()) {
    RequestJson out = RequestJson::object();
    for (const auto& [key, item] : value.items()) out[FenceString(key)] = Fence(item);
    return out;
  }
  return value;
}

absl::StatusOr<RenderedPrompt> SpecialTextFence::Lift(std::string text) const {
  RenderedPrompt out;
  if (texts_.empty()) {
    out.text = std::move(text);
    return out;
  }
  size_t pos = 0;
  for (size_t open = text.find(open_); open != std::string::npos; open = text.find(open_, pos)) {
    const size_t inside = open + open_.size();
    const size_t close = text.find(close_, inside);
    if (close == std::string::npos) break;  // reported below: the nonce remains
    out.text.append(text, pos, open - pos);
    const size_t begin = out.text.size();
    out.text.append(text, inside, close - inside);
    out.plain.push_back({begin, out.text.size()});
    pos = close + close_.size();
  }
  out.text.append(text, pos, std::string::npos);
  if (out.text.find(nonce_) != std::string::npos) {
    return absl::InvalidArgumentError(
        "messages: the chat template cut through a special token's text in what the request "
        "sent (it slices a string), so it cannot be kept from becoming a special token");
  }
  return out;
}

}  // namespace linserve
