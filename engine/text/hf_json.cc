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

// nlohmann's DOM builder, except that the model's vocab and merges go to
// HfModelTables as they are read. Keys are tracked per depth to know where
// the parser is.
class TablesSax {
 public:
  using json = nlohmann::json;

  TablesSax(json& root, HfModelTables* tables) : dom_(root, /*allow_exceptions=*/true),
                                                 tables_(tables) {}

  // The first table error: its JSON path and reason.
  const std::string& error_path() const { return error_path_; }
  const std::string& error() const { return error_; }

  bool null() { return Value("null") && (Capturing() || dom_.null()); }
  bool boolean(bool value) { return Value("a boolean") && (Capturing() || dom_.boolean(value)); }
  bool number_integer(json::number_integer_t value) {
    if (mode_ == Mode::kVocab) return VocabId(value);
    return Value("a number") && (Capturing() || dom_.number_integer(value));
  }
  bool number_unsigned(json::number_unsigned_t value) {
    if (mode_ == Mode::kVocab) {
      return value > static_cast<json::number_unsigned_t>(INT64_MAX)
                 ? Fail(VocabPath(), "the id is not an integer in [0, 2^31)")
                 : VocabId(static_cast<int64_t>(value));
    }
    return Value("a number") && (Capturing() || dom_.number_unsigned(value));
  }
  bool number_float(json::number_float_t value, const json::string_t& text) {
    return Value("a number") && (Capturing() || dom_.number_float(value, text));
  }
  bool string(json::string_t& value) {
    if (mode_ == Mode::kMerges && depth_ == capture_depth_) {
      // The older form, "a b": the first space separates the two tokens.
      const size_t space = value.find(' ');
      if (space == std::string::npos || value.find(' ', space + 1) != std::string::npos) {
        return Fail(MergePath(), "a merge string must be two tokens separated by one space");
      }
      tables_->merges.emplace_back(value.substr(0, space), value.substr(space + 1));
      return true;
    }
    if (mode_ == Mode::kMerges && depth_ == capture_depth_ + 1) {
      pair_.push_back(std::move(value));
      return pair_.size() <= 2 || Fail(MergePath(), "a merge must be \"a b\" or [\"a\", \"b\"]");
    }
    return Value("a string") && (Capturing() || dom_.string(value));
  }
  bool binary(json::binary_t& value) { return dom_.binary(value); }
  bool start_object(std::size_t size) {
    if (Capturing()) return Value("an object");
    Push();
    if (AtTable("vocab")) {
      mode_ = Mode::kVocab;
      capture_depth_ = depth_;
      tables_->has_vocab = true;
    }
    return dom_.start_object(size);
  }
  bool key(json::string_t& key) {
    if (mode_ == Mode::kVocab) {
      key_ = key;
      return true;
    }
    keys_.back() = key;
    return dom_.key(key);
  }
  bool end_object() {
    if (mode_ == Mode::kVocab && depth_ == capture_depth_) mode_ = Mode::kNone;
    Pop();
    return dom_.end_object();
  }
  bool start_array(std::size_t size) {
    if (mode_ == Mode::kMerges && depth_ == capture_depth_) {
      ++depth_;
      pair_.clear();
      return true;
    }
    if (Capturing()) return Value("an array");
    Push();
    if (AtTable("merges")) {
      mode_ = Mode::kMerges;
      capture_depth_ = depth_;
      tables_->has_merges = true;
    }
    return dom_.start_array(size);
  }
  bool end_array() {
    if (mode_ == Mode::kMerges && depth_ == capture_depth_ + 1) {
      --depth_;
      if (pair_.size() != 2) return Fail(MergePath(), "a merge must be \"a b\" or [\"a\", \"b\"]");
      tables_->merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      return true;
    }
    if (mode_ == Mode::kMerges && depth_ == capture_depth_) mode_ = Mode::kNone;
    Pop();
    return dom_.end_array();
  }
  // A template as nlohmann's own: the exception is rethrown as its own type.
  template <typename Exception>
  bool parse_error(std::size_t position, const std::string& last_token, const Exception& error) {
    return dom_.parse_error(position, last_token, error);
  }

 private:
  enum class Mode { kNone, kVocab, kMerges };

  bool Capturing() const { return mode_ != Mode::kNone; }
  void Push() {
    ++depth_;
    keys_.emplace_back();
  }
  void Pop() {
    --depth_;
    keys_.pop_back();
  }
  // True when the container just opened is /model/<name>.
  bool AtTable(const char* name) const {
    return tables_ != nullptr && depth_ == 3 && keys_[0] == "model" && keys_[1] == name;
  }
  // A value inside a captured table that has no place there.
  bool Value(const char* what) {
    if (mode_ == Mode::kVocab) return Fail(VocabPath(), "the id is not an integer in [0, 2^31)");
    if (mode_ == Mode::kMerges) {
      return Fail(MergePath(), absl::StrCat("a merge must be \"a b\" or [\"a\", \"b\"], not ",
                                            what));
    }
    return true;
  }
  bool VocabId(int64_t id) {
    if (id < 0 || id >= (int64_t{1} << 31)) {
      return Fail(VocabPath(), "the id is not an integer in [0, 2^31)");
    }
    tables_->vocab.emplace_back(std::move(key_), id);
    return true;
  }
  std::string VocabPath() const { return "/model/vocab/" + EscapePointerToken(key_); }
  std::string MergePath() const {
    return absl::StrCat("/model/merges/", tables_->merges.size());
  }
  bool Fail(std::string path, std::string reason) {
    error_path_ = std::move(path);
    error_ = std::move(reason);
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  HfModelTables* tables_;
  int depth_ = 0;                  // containers open in the DOM
  std::vector<std::string> keys_;  // per open container: the key being read
  Mode mode_ = Mode::kNone;
  int capture_depth_ = 0;          // depth_ of the captured table
  std::string key_;                // the vocab key being read
  std::vector<std::string> pair_;  // the merge pair being read
  std::string error_path_;
  std::string error_;
};

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
                                           int max_depth, HfModelTables* tables) {
  const HfJsonPlace root{std::string(file), ""};
  size_t offset = 0;
  if (MaxDepth(text, max_depth, &offset) > max_depth) {
    return HfLoadError(root, absl::StrCat("JSON nested deeper than ", max_depth,
                                          " levels (at byte ", offset, ")"));
  }
  try {
    if (tables == nullptr) return nlohmann::json::parse(text.begin(), text.end());
    nlohmann::json json;
    TablesSax sax(json, tables);
    if (!nlohmann::json::sax_parse(text.begin(), text.end(), &sax) && !sax.error().empty()) {
      return HfLoadError({std::string(file), sax.error_path()}, sax.error());
    }
    return json;
  } catch (const nlohmann::json::parse_error& error) {
    // error.what() reads "[json.exception.parse_error.101] parse error at line
    // 3, column 7: syntax error ... unexpected end of input ...".
    return HfLoadError(root, absl::StrCat("malformed or truncated JSON (byte ", error.byte,
                                          "): ", error.what()));
  } catch (const nlohmann::json::exception& error) {
    // Any other of the parser's refusals (a number out of range: "7e98998").
    return HfLoadError(root, absl::StrCat("malformed JSON: ", error.what()));
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
