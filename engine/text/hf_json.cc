#include "engine/text/hf_json.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace linserve {

namespace {

// JSON Pointer escaping (RFC 6901): "~" -> "~0", "/" -> "~1".
std::string EscapePointerToken(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// The deepest nesting of arrays and objects in `text`, counting brackets
// outside strings; stops early once past `limit`. Returns the byte offset of the
// bracket that went past it through `offset`.
int MaxDepth(std::string_view text, int limit, size_t* offset) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
      if (depth > deepest) deepest = depth;
      if (depth > limit) {
        *offset = i;
        return depth;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

HfJsonPlace HfJsonPlace::Child(std::string_view key) const {
  return {file, absl::StrCat(path, "/", EscapePointerToken(key))};
}

HfJsonPlace HfJsonPlace::Child(size_t index) const {
  return {file, absl::StrCat(path, "/", index)};
}

absl::Status HfLoadError(const HfJsonPlace& place, absl::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrCat(place.file, ": ", place.path.empty() ? "/" : place.path, ": ",
                   reason));
}

absl::StatusOr<nlohmann::json> ParseHfJson(std::string_view text, std::string_view file,
                                           int max_depth) {
  const HfJsonPlace root{std::string(file), ""};
  size_t offset = 0;
  if (MaxDepth(text, max_depth, &offset) > max_depth) {
    return HfLoadError(root, absl::StrCat("JSON nested deeper than ", max_depth,
                                          " levels (at byte ", offset, ")"));
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& error) {
    // error.what() reads "[json.exception.parse_error.101] parse error at line
    // 3, column 7: syntax error ... unexpected end of input ...".
    return HfLoadError(root, absl::StrCat("malformed or truncated JSON (byte ", error.byte,
                                          "): ", error.what()));
  }
}

absl::StatusOr<std::string> RequiredString(const nlohmann::json& object, std::string_view key,
                                           const HfJsonPlace& place) {
  const auto it = object.find(key);
  if (it == object.end()) return HfLoadError(place.Child(key), "missing");
  if (!it->is_string()) return HfLoadError(place.Child(key), "not a string");
  return it->get<std::string>();
}

absl::StatusOr<bool> OptionalBool(const nlohmann::json& object, std::string_view key,
                                  bool fallback, const HfJsonPlace& place) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return HfLoadError(place.Child(key), "not a boolean");
  return it->get<bool>();
}

absl::StatusOr<const nlohmann::json*> RequiredArray(const nlohmann::json& object,
                                                    std::string_view key,
                                                    const HfJsonPlace& place) {
  const auto it = object.find(key);
  if (it == object.end()) return HfLoadError(place.Child(key), "missing");
  if (!it->is_array()) return HfLoadError(place.Child(key), "not an array");
  return &*it;
}

absl::StatusOr<std::string> ComponentType(const nlohmann::json& component,
                                          const HfJsonPlace& place) {
  if (!component.is_object()) return HfLoadError(place, "not an object");
  return RequiredString(component, "type", place);
}

}  // namespace linserve
