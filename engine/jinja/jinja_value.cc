#include "engine/jinja/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace linserve::jinja {

namespace {

// The index key of a key that is not a string, equal where Python's keys are
// equal: true, 1 and 1.0 are "n1"; tuples hold their items' keys.
std::string OtherKey(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kUndefined:
      return "u";
    case Value::Kind::kNone:
      return "N";
    case Value::Kind::kBool:
      return key.boolean() ? "n1" : "n0";
    case Value::Kind::kInt:
      return absl::StrCat("n", key.integer());
    case Value::Kind::kFloat: {
      const double f = key.number();
      // 2^63 is past int64_t; an integral float below it is that integer's key.
      if (std::trunc(f) == f && std::fabs(f) < 9.2233720368547758e18) {
        return absl::StrCat("n", static_cast<int64_t>(f));
      }
      return "f" + FloatRepr(f);
    }
    case Value::Kind::kString:
      return "s" + key.string();
    case Value::Kind::kList:
      if (key.is_tuple()) {
        std::string out = "(";
        for (const Value& item : key.list()) {
          const std::string inner = OtherKey(item);
          absl::StrAppend(&out, inner.size(), ":", inner);
        }
        return out;
      }
      break;
    default:
      break;
  }
  throw RenderError(absl::StrCat("unhashable type: '", key.TypeName(), "'"));
}

}  // namespace

const Value* Dict::Find(const std::string& key) const {
  auto it = string_index_.find(key);
  return it == string_index_.end() ? nullptr : &items_[it->second].second;
}

const Value* Dict::Find(const Value& key) const {
  if (key.is_string()) return Find(key.string());
  auto it = other_index_.find(OtherKey(key));
  return it == other_index_.end() ? nullptr : &items_[it->second].second;
}

void Dict::Set(const std::string& key, Value value) {
  auto [it, inserted] = string_index_.try_emplace(key, items_.size());
  if (inserted) {
    items_.emplace_back(Value::String(key), std::move(value));
  } else {
    items_[it->second].second = std::move(value);
  }
}

void Dict::Set(const Value& key, Value value) {
  if (key.is_string()) return Set(key.string(), std::move(value));
  auto [it, inserted] = other_index_.try_emplace(OtherKey(key), items_.size());
  if (inserted) {
    items_.emplace_back(key, std::move(value));
  } else {
    items_[it->second].second = std::move(value);
  }
}

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = f;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::move(s);
  return v;
}
Value Value::SafeString(std::string s) {
  Value v = String(std::move(s));
  v.is_safe_ = true;
  return v;
}
Value Value::MakeList(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::MakeTuple(List items) {
  Value v = MakeList(std::move(items));
  v.is_tuple_ = true;
  return v;
}
Value Value::MakeDict(bool is_namespace) {
  Value v;
  v.kind_ = Kind::kDict;
  v.is_namespace_ = is_namespace;
  v.dict_ = std::make_shared<Dict>();
  return v;
}
Value Value::MakeFunction(Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.function_ = std::make_shared<Function>(std::move(f));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = json.get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? Float(static_cast<double>(u))
                                                  : Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJson(item));
      return MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value dict = MakeDict();
      for (const auto& [key, item] : json.items()) dict.dict().Set(key, FromJson(item));
      return dict;
    }
    default:
      return Value();
  }
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !string_.empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return is_namespace_ || dict_->size() > 0;
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buffer[64];
  // Python's repr: the shortest digits that read back, positional for
  // exponents in [-4, 16), scientific beyond.
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, f, std::chars_format::scientific);
  std::string sci(buffer, end);
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exponent = std::stoi(sci.substr(e + 1));
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) {
    return out + "0." + std::string(-exponent - 1, '0') + digits;
  }
  if (static_cast<int>(digits.size()) <= exponent + 1) {
    return out + digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
}

void AppendJsonString(std::string_view s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char escaped[8];
          snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

namespace {

std::string PythonQuote(const std::string& s) {
  // repr() picks single quotes unless the string holds one and no double.
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

}  // namespace

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return string_;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return bool_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return FloatRepr(float_);
    case Kind::kString:
      return PythonQuote(string_);
    case Kind::kList: {
      std::string out = is_tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (is_tuple_) return out + (list_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = is_namespace_ ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [key, value] : dict_->items()) {
        if (!first) out += ", ";
        first = false;
        out += key.Repr() + ": " + value.Repr();
      }
      return out + (is_namespace_ ? "}>" : "}");
    }
    case Kind::kFunction:
      return "<function>";
  }
  return "";
}

bool Value::Equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ == Kind::kInt && other.kind_ == Kind::kInt) return int_ == other.int_;
    return number() == other.number();
  }
  if (kind_ == Kind::kBool && other.is_number()) return Int(bool_).Equals(other);
  if (is_number() && other.kind_ == Kind::kBool) return Equals(Int(other.bool_));
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return bool_ == other.bool_;
    case Kind::kString:
      return string_ == other.string_;
    case Kind::kList:
      if (is_tuple_ != other.is_tuple_ || list_->size() != other.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].Equals((*other.list_)[i])) return false;
      }
      return true;
    case Kind::kDict:
      if (dict_ == other.dict_) return true;
      if (dict_->size() != other.dict_->size()) return false;
      for (const auto& [key, value] : dict_->items()) {
        const Value* theirs = other.dict_->Find(key);
        if (theirs == nullptr || !value.Equals(*theirs)) return false;
      }
      return true;
    case Kind::kFunction:
      return function_ == other.function_;
    default:
      return false;
  }
}

namespace {

// json.dumps's text for a key: strings as they are, numbers as repr, true,
// false and null; other keys are refused as Python refuses them.
std::string JsonKey(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString:
      return key.string();
    case Value::Kind::kNone:
      return "null";
    case Value::Kind::kBool:
      return key.boolean() ? "true" : "false";
    case Value::Kind::kInt:
      return std::to_string(key.integer());
    case Value::Kind::kFloat: {
      std::string json;
      key.AppendJsonNumber(json);
      return json;
    }
    default:
      throw RenderError(
          absl::StrCat("tojson: keys must be str, int, float, bool or None, not ", key.TypeName()));
  }
}

// sort_keys: Python sorts the keys themselves, so strings among strings and
// numbers among numbers; a mix is its TypeError.
void SortJsonKeys(std::vector<const std::pair<Value, Value>*>& items) {
  const bool strings = items.front()->first.is_string();
  for (const auto* item : items) {
    const Value& key = item->first;
    const bool numeric = key.is_number() || key.kind() == Value::Kind::kBool;
    if (strings ? !key.is_string() : !numeric) {
      throw RenderError("tojson: sort_keys cannot order keys of different types");
    }
  }
  std::stable_sort(items.begin(), items.end(), [strings](const auto* a, const auto* b) {
    if (strings) return a->first.string() < b->first.string();
    auto n = [](const Value& v) {
      return v.kind() == Value::Kind::kBool ? (v.boolean() ? 1.0 : 0.0) : v.number();
    };
    return n(a->first) < n(b->first);
  });
}

}  // namespace

std::string Value::ToJson(const JsonFormat& format) const {
  std::string out;
  AppendJson(format, 0, out);
  return out;
}

void Value::AppendJson(const JsonFormat& format, int depth, std::string& out) const {
  if (depth > 512) throw RenderError("tojson: the value is nested deeper than 512");
  std::string newline;
  if (format.indent >= 0) newline = "\n" + std::string(format.indent * (depth + 1), ' ');
  std::string closing;
  if (format.indent >= 0) closing = "\n" + std::string(format.indent * depth, ' ');
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      out += "null";
      return;
    case Kind::kBool:
      out += bool_ ? "true" : "false";
      return;
    case Kind::kInt:
      out += std::to_string(int_);
      return;
    case Kind::kFloat:
      AppendJsonNumber(out);
      return;
    case Kind::kString:
      AppendJsonString(string_, out);
      return;
    case Kind::kList:
      if (list_->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += format.item_separator;
        out += newline;
        (*list_)[i].AppendJson(format, depth + 1, out);
      }
      out += closing + "]";
      return;
    case Kind::kDict: {
      if (dict_->size() == 0) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& item : dict_->items()) items.push_back(&item);
      if (format.sort_keys && items.size() > 1) SortJsonKeys(items);
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += format.item_separator;
        out += newline;
        AppendJsonString(JsonKey(items[i]->first), out);
        out += format.key_separator;
        items[i]->second.AppendJson(format, depth + 1, out);
      }
      out += closing + "}";
      return;
    }
    case Kind::kFunction:
      throw RenderError("tojson: a function is not JSON");
  }
}

void Value::AppendJsonNumber(std::string& out) const {
  if (kind_ == Kind::kInt) {
    out += std::to_string(int_);
  } else if (std::isnan(float_)) {
    out += "NaN";
  } else if (std::isinf(float_)) {
    out += float_ > 0 ? "Infinity" : "-Infinity";
  } else {
    out += FloatRepr(float_);
  }
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kList:
      return is_tuple_ ? "tuple" : "list";
    case Kind::kDict:
      return is_namespace_ ? "namespace" : "dict";
    case Kind::kFunction:
      return "function";
  }
  return "?";
}

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    int length = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool valid = length > 0 && i + length <= s.size();
    for (int k = 1; valid && k < length; ++k) valid = (s[i + k] & 0xC0) == 0x80;
    if (!valid) {
      // An invalid byte stands for itself, marked so EncodeUtf8 writes it back.
      out += static_cast<char32_t>(0x110000 + c);
      ++i;
      continue;
    }
    char32_t cp = length == 1 ? c : c & (0x7F >> length);
    for (int k = 1; k < length; ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    out += cp;
    i += length;
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) {
    if (cp >= 0x110000) {
      out += static_cast<char>(cp - 0x110000);
    } else if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

}  // namespace linserve::jinja
