#include "engine/jinja/jinja_percent_format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/jinja/jinja_builtin_helpers.h"

namespace linserve::jinja {
namespace {

// type(value).__name__ as Python's errors say it.
std::string PythonTypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kFunction:
      return "function";
  }
  return "object";
}

struct Spec {
  bool left = false, plus = false, space = false, alternate = false, zero = false;
  int64_t width = 0;
  int64_t precision = -1;  // -1: none
};

// `text` padded to the width in code points: on the right for "-", else on
// the left, with zeros after `sign_and_prefix` where zeros are asked for.
std::string Pad(const Spec& spec, const std::string& sign_and_prefix, const std::string& body,
                bool zeros_allowed) {
  const int64_t length = static_cast<int64_t>(DecodeUtf8(sign_and_prefix + body).size());
  if (spec.width <= length) return sign_and_prefix + body;
  const std::string fill(static_cast<size_t>(spec.width - length), ' ');
  if (spec.left) return sign_and_prefix + body + fill;
  if (spec.zero && zeros_allowed) {
    return sign_and_prefix + std::string(fill.size(), '0') + body;
  }
  return fill + sign_and_prefix + body;
}

// int(value) for %d, %x and %o: bools and integers, and floats (truncated)
// only where `floats` (Python's %x refuses them).
int64_t IntegerOf(const Value& v, char conversion, bool floats) {
  if (v.kind() == Value::Kind::kBool) return v.boolean() ? 1 : 0;
  if (v.kind() == Value::Kind::kInt) return v.integer();
  if (v.kind() == Value::Kind::kFloat && floats) {
    const double f = v.number();
    if (std::isinf(f)) throw RenderError("cannot convert float infinity to integer");
    if (std::isnan(f)) throw RenderError("cannot convert float NaN to integer");
    if (std::fabs(f) >= 9.2233720368547758e18) {
      throw RenderError("an integer past 64 bits is not supported");
    }
    return static_cast<int64_t>(f);
  }
  throw RenderError(absl::StrCat("%", std::string(1, conversion),
                                 " format: ", floats ? "a real number" : "an integer",
                                 " is required, not ", PythonTypeName(v)));
}

std::string FormatInteger(const Spec& spec, char conversion, int64_t value) {
  const uint64_t magnitude =
      value < 0 ? ~static_cast<uint64_t>(value) + 1 : static_cast<uint64_t>(value);
  std::string digits = conversion == 'x'   ? absl::StrFormat("%x", magnitude)
                       : conversion == 'X' ? absl::StrFormat("%X", magnitude)
                       : conversion == 'o' ? absl::StrFormat("%o", magnitude)
                                           : absl::StrCat(magnitude);
  if (spec.precision > static_cast<int64_t>(digits.size())) {
    digits.insert(0, static_cast<size_t>(spec.precision) - digits.size(), '0');
  }
  std::string prefix = value < 0 ? "-" : spec.plus ? "+" : spec.space ? " " : "";
  if (spec.alternate && conversion != 'd') {
    prefix += conversion == 'o' ? "0o" : conversion == 'x' ? "0x" : "0X";
  }
  return Pad(spec, prefix, digits, true);
}

std::string FormatFloat(const Spec& spec, char conversion, double value) {
  std::string format = "%";
  if (spec.left) format += '-';
  if (spec.plus) format += '+';
  if (spec.space) format += ' ';
  if (spec.alternate) format += '#';
  if (spec.zero) format += '0';
  format += std::to_string(spec.width);
  format += '.' + std::to_string(spec.precision < 0 ? 6 : spec.precision);
  format += conversion;
  const int size = std::snprintf(nullptr, 0, format.c_str(), value);
  std::string out(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(out.data(), out.size(), format.c_str(), value);
  out.resize(static_cast<size_t>(size));
  return out;
}

std::string FormatText(const Spec& spec, std::string text) {
  if (spec.precision >= 0) {
    std::u32string points = DecodeUtf8(text);
    if (static_cast<int64_t>(points.size()) > spec.precision) {
      points.resize(static_cast<size_t>(spec.precision));
      text = EncodeUtf8(points);
    }
  }
  return Pad(spec, "", text, false);
}

std::string FormatChar(const Spec& spec, const Value& v) {
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) {
    const int64_t code = v.kind() == Value::Kind::kBool ? v.boolean() : v.integer();
    if (code < 0 || code > 0x10FFFF) throw RenderError("%c arg not in range(0x110000)");
    return Pad(spec, "", EncodeUtf8(std::u32string(1, static_cast<char32_t>(code))), false);
  }
  if (v.is_string() && DecodeUtf8(v.string()).size() == 1) return Pad(spec, "", v.string(), false);
  throw RenderError("%c requires int or char");
}

std::string Convert(const Spec& spec, char conversion, const Value& v) {
  switch (conversion) {
    case 's':
      return FormatText(spec, v.Str());
    case 'r':
      return FormatText(spec, v.is_undefined() ? "Undefined" : v.Repr());
    case 'd':
    case 'i':
    case 'u':
      return FormatInteger(spec, 'd', IntegerOf(v, conversion, true));
    case 'x':
    case 'X':
    case 'o':
      return FormatInteger(spec, conversion, IntegerOf(v, conversion, false));
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      if (v.kind() == Value::Kind::kBool) return FormatFloat(spec, conversion, v.boolean());
      if (!v.is_number()) {
        throw RenderError(absl::StrCat("must be real number, not ", PythonTypeName(v)));
      }
      return FormatFloat(spec, conversion, v.number());
    case 'c':
      return FormatChar(spec, v);
    default:
      return "";  // the caller has refused other conversions
  }
}

}  // namespace

Value PercentFormat(Interpreter& in, const Value& format_value, const Value& args) {
  const std::string format = format_value.Str();
  const bool safe = format_value.is_safe();
  // As CPython: a tuple is the values; a dict (or a list) may serve
  // %(key)s and is otherwise one value, never "left over".
  const bool tuple = args.is_tuple();
  const bool mapping = !tuple && (args.is_dict() || args.is_list());
  size_t next = 0;
  bool single_used = false;
  auto next_arg = [&]() -> const Value& {
    if (tuple) {
      if (next >= args.list().size()) throw RenderError("not enough arguments for format string");
      return args.list()[next++];
    }
    if (single_used) throw RenderError("not enough arguments for format string");
    single_used = true;
    return args;
  };
  auto star = [&]() {
    const Value& v = next_arg();
    if (v.kind() != Value::Kind::kInt) throw RenderError("* wants int");
    return v.integer();
  };
  std::string out;
  size_t i = 0;
  while (i < format.size()) {
    const size_t percent = format.find('%', i);
    if (percent == std::string::npos) {
      out.append(format, i, std::string::npos);
      break;
    }
    out.append(format, i, percent - i);
    i = percent + 1;
    if (i < format.size() && format[i] == '%') {
      out += '%';
      ++i;
      continue;
    }
    const Value* keyed = nullptr;
    if (i < format.size() && format[i] == '(') {
      int depth = 1;
      size_t end = i + 1;
      for (; end < format.size() && depth > 0; ++end) {
        depth += format[end] == '(' ? 1 : format[end] == ')' ? -1 : 0;
      }
      if (depth > 0) throw RenderError("incomplete format key");
      const std::string key = format.substr(i + 1, end - i - 2);
      if (!mapping) throw RenderError("format requires a mapping");
      if (!args.is_dict()) {
        throw RenderError("list indices must be integers or slices, not str");
      }
      keyed = args.dict().Find(key);
      if (keyed == nullptr) throw RenderError(absl::StrCat("KeyError: '", key, "'"));
      single_used = true;  // as CPython: a later %s finds no value left
      i = end;
    }
    Spec spec;
    for (; i < format.size(); ++i) {
      const char c = format[i];
      if (c == '-') {
        spec.left = true;
      } else if (c == '+') {
        spec.plus = true;
      } else if (c == ' ') {
        spec.space = true;
      } else if (c == '#') {
        spec.alternate = true;
      } else if (c == '0') {
        spec.zero = true;
      } else {
        break;
      }
    }
    // Past the output limit, a width or precision is refused as it is read.
    auto number = [&]() {
      int64_t n = 0;
      for (; i < format.size() && format[i] >= '0' && format[i] <= '9'; ++i) {
        n = n * 10 + (format[i] - '0');
        in.CheckSize(static_cast<size_t>(n));
      }
      return n;
    };
    if (i < format.size() && format[i] == '*') {
      ++i;
      spec.width = star();
      if (spec.width < 0) {
        spec.left = true;
        spec.width = -spec.width;
      }
    } else {
      spec.width = number();
    }
    if (i < format.size() && format[i] == '.') {
      ++i;
      if (i < format.size() && format[i] == '*') {
        ++i;
        spec.precision = std::max<int64_t>(star(), 0);
      } else {
        spec.precision = number();
      }
    }
    in.CheckSize(static_cast<size_t>(spec.width));
    in.CheckSize(static_cast<size_t>(std::max<int64_t>(spec.precision, 0)));
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) throw RenderError("incomplete format");
    const char conversion = format[i];
    if (std::string_view("srdiuxXoeEfFgGc").find(conversion) == std::string_view::npos) {
      if (conversion == 'a') throw RenderError("the %a conversion is not supported");
      if (conversion == '%') throw RenderError("a '%' conversion with flags is not supported");
      throw RenderError(absl::StrFormat("unsupported format character '%c' (0x%x) at index %d",
                                        conversion, static_cast<unsigned char>(conversion), i));
    }
    ++i;
    const Value& value = keyed != nullptr ? *keyed : next_arg();
    // Markup's % escapes the text of what %s and %r insert.
    out += safe && (conversion == 's' || conversion == 'r')
               ? Convert(spec, 's', Escape(Value::String(Convert(Spec(), conversion, value))))
               : Convert(spec, conversion, value);
    in.CheckSize(out.size());
  }
  if (tuple ? next < args.list().size() : !mapping && !single_used) {
    throw RenderError("not all arguments converted during string formatting");
  }
  return safe ? Value::SafeString(std::move(out)) : Value::String(std::move(out));
}

}  // namespace linserve::jinja
