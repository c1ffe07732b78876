#include "engine/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/base/status_macros.h"
#include "engine/grammar/integer_range.h"
#include "engine/grammar/regex_to_gbnf.h"

namespace linserve {
namespace {

using json = nlohmann::ordered_json;

// The JSON every schema builds on. Whitespace between tokens is optional and
// one character at most, so a small model cannot spend its tokens on it
// (indentation would multiply an answer's length). Dates are real ones: a
// month's own days, years from 0001; February stops at the 28th, since a
// leap year's 29th would need the year's arithmetic.
constexpr char kPrelude[] = R"(json-ws ::= | " " | "\n"
json-char ::= [^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" json-ws (json-string json-ws ":" json-ws json-value json-ws ("," json-ws json-string json-ws ":" json-ws json-value json-ws)*)? "}"
json-array ::= "[" json-ws (json-value json-ws ("," json-ws json-value json-ws)*)? "]"
json-date ::= json-year "-" ("0" [13578] | "1" [02]) "-" (json-day28 | "29" | "30" | "31") | json-year "-" ("0" [469] | "11") "-" (json-day28 | "29" | "30") | json-year "-02-" json-day28
json-year ::= "000" [1-9] | "00" [1-9] [0-9] | "0" [1-9] [0-9]{2} | [1-9] [0-9]{3}
json-day28 ::= "0" [1-9] | "1" [0-9] | "2" [0-8]
json-time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])
json-hex4 ::= [0-9a-fA-F]{4}
json-uuid ::= json-hex4 json-hex4 "-" json-hex4 "-" json-hex4 "-" json-hex4 "-" json-hex4 json-hex4 json-hex4
)";

// Keywords that say nothing about which texts are valid.
const std::set<std::string> kAnnotations = {"title", "description", "default", "examples",
                                            "$schema", "$id", "$comment", "deprecated",
                                            "readOnly", "writeOnly"};
const std::set<std::string> kConstraints = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems",
    "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs",
    "definitions", "pattern", "minLength", "maxLength", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "format"};

// A value's JSON type, "integer" for numbers without a fraction.
std::string TypeOf(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    case json::value_t::number_float: {
      const double d = value.get<double>();
      return std::trunc(d) == d ? "integer" : "number";
    }
    default: return "integer";
  }
}

std::string Repeat(const std::string& item, int64_t min, std::optional<int64_t> max) {
  if (max && *max == min && min == 1) return item;
  if (max) return absl::StrCat("(", item, "){", min, ",", *max, "}");
  return absl::StrCat("(", item, "){", min, ",}");
}

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, const JsonSchemaOptions& options)
      : root_(root), options_(options) {}

  absl::StatusOr<std::string> Compile() {
    LINSERVE_ASSIGN_OR_RETURN(std::string top, Visit(root_, "#"));
    return absl::StrCat("root ::= ", top, "\n", rules_, kPrelude);
  }

 private:
  absl::Status Unsupported(const std::string& path, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("json_schema ", path, ": ", what));
  }

  int64_t MaxRepeat() const { return options_.limits.max_repeat; }
  std::string RepeatRange() const {
    return absl::StrCat("must be an integer in [0, grammar_max_repeat = ", MaxRepeat(), "]");
  }

  std::string Rule(const std::string& body) {
    const std::string name = absl::StrCat("s", next_rule_++);
    absl::StrAppend(&rules_, name, " ::= ", body, "\n");
    return name;
  }

  absl::StatusOr<std::string> Visit(const json& schema, const std::string& path) {
    if (++depth_ > options_.limits.max_nesting) {
      --depth_;
      return Unsupported(path, absl::StrCat("schemas nest deeper than grammar_max_nesting = ",
                                            options_.limits.max_nesting));
    }
    absl::StatusOr<std::string> out = VisitChecked(schema, path);
    --depth_;
    return out;
  }

  absl::StatusOr<std::string> VisitChecked(const json& schema, const std::string& path) {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return std::string("json-value");
      return Unsupported(path, "the schema false matches nothing");
    }
    if (!schema.is_object()) return Unsupported(path, "a schema must be an object or a boolean");
    for (const auto& [key, value] : schema.items()) {
      if (!kConstraints.count(key) && !kAnnotations.count(key)) {
        return Unsupported(path, absl::StrCat("the keyword '", key, "' is not supported"));
      }
    }
    // A schema means all of its keywords at once. These are compiled on
    // their own, so beside another constraint they are refused rather than
    // half-honoured.
    int constraints = 0;
    for (const auto& [key, value] : schema.items()) {
      constraints += kConstraints.count(key) && key != "$defs" && key != "definitions" ? 1 : 0;
    }
    for (const char* alone : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (schema.contains(alone) && constraints > 1) {
        return Unsupported(path, absl::StrCat("'", alone, "' beside other constraints is not supported"));
      }
    }
    if (schema.contains("$ref")) return Reference(schema, path);
    if (schema.contains("const") || schema.contains("enum")) return Values(schema, constraints, path);
    for (const char* any : {"anyOf", "oneOf"}) {
      if (!schema.contains(any)) continue;
      const json& options = schema[any];
      if (!options.is_array() || options.empty()) return Unsupported(path + "/" + any, "must be a non-empty array");
      if (std::string(any) == "oneOf" && !Disjoint(options)) {
        return Unsupported(path + "/oneOf",
                           "alternatives that may overlap are not supported (a grammar cannot "
                           "exclude what two of them share): use anyOf, or give them different "
                           "types or a required property with different const values");
      }
      std::vector<std::string> alternatives;
      for (size_t i = 0; i < options.size(); ++i) {
        LINSERVE_ASSIGN_OR_RETURN(std::string a, Visit(options[i], absl::StrCat(path, "/", any, "/", i)));
        alternatives.push_back(a);
      }
      return Rule(absl::StrJoin(alternatives, " | "));
    }
    if (schema.contains("allOf")) {
      const json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1) {
        return Unsupported(path + "/allOf", "allOf is supported with exactly one schema");
      }
      return Visit(all[0], path + "/allOf/0");
    }
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const json& type = schema["type"];
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array()) {
        for (const json& t : type) {
          if (!t.is_string()) return Unsupported(path + "/type", "must name types");
          types.push_back(t.get<std::string>());
        }
      } else {
        return Unsupported(path + "/type", "must be a string or an array of strings");
      }
    } else if (constraints == 0) {
      return std::string("json-value");
    } else {
      // No type: every type, each with the keywords that apply to it.
      types = {"object", "array", "string", "number", "boolean", "null"};
    }
    std::vector<std::string> alternatives;
    for (const std::string& type : types) {
      LINSERVE_ASSIGN_OR_RETURN(std::string a, OfType(schema, type, path));
      alternatives.push_back(a);
    }
    return alternatives.size() == 1 ? alternatives[0] : Rule(absl::StrJoin(alternatives, " | "));
  }

  // const or enum, the values kept to the schema's types.
  absl::StatusOr<std::string> Values(const json& schema, int constraints, const std::string& path) {
    const bool typed = schema.contains("type");
    if (constraints > (typed ? 2 : 1)) {
      return Unsupported(path, "const or enum beside constraints other than type is not supported");
    }
    json values = schema.contains("const") ? json::array({schema["const"]}) : schema["enum"];
    if (!values.is_array() || values.empty()) return Unsupported(path + "/enum", "must be a non-empty array");
    std::set<std::string> types = TypesOf(schema);
    std::vector<std::string> literals;
    for (const json& value : values) {
      if (typed && !types.count(TypeOf(value))) continue;
      literals.push_back(GbnfLiteral(CanonicalJson(value).dump()));
    }
    if (literals.empty()) return Unsupported(path, "no value of const or enum has the schema's type");
    return Rule(absl::StrJoin(literals, " | "));
  }

  // The JSON types a schema's values may have, "integer" apart from the
  // other numbers; every type where it cannot tell.
  std::set<std::string> TypesOf(const json& schema) const {
    const std::set<std::string> all = {"object", "array", "string", "integer", "number", "boolean", "null"};
    if (!schema.is_object()) return all;
    std::set<std::string> types;
    if (const auto type = schema.find("type"); type != schema.end()) {
      for (const json& t : type->is_array() ? *type : json::array({*type})) {
        if (!t.is_string()) return all;
        types.insert(t.get<std::string>());
        if (t == "number") types.insert("integer");
      }
      return types;
    }
    const auto values = schema.find(schema.contains("const") ? "const" : "enum");
    if (values == schema.end()) return all;
    for (const json& v : schema.contains("const") ? json::array({*values}) : *values) {
      types.insert(TypeOf(v));
    }
    return types;
  }

  // Whether no value can match two of `options`: their types are apart,
  // or each is an object with one required property of its own const
  // value (a tagged union).
  bool Disjoint(const json& options) const {
    bool apart = true;
    for (size_t i = 0; i < options.size() && apart; ++i) {
      for (size_t j = i + 1; j < options.size() && apart; ++j) {
        const std::set<std::string> a = TypesOf(options[i]), b = TypesOf(options[j]);
        for (const std::string& t : a) apart = apart && !b.count(t);
      }
    }
    if (apart) return true;
    std::set<std::string> tags;
    std::string key;
    for (const json& option : options) {
      if (!option.is_object() || option.value("type", json()) != "object") return false;
      const json properties = option.value("properties", json::object());
      const json required = option.value("required", json::array());
      bool tagged = false;
      for (const auto& [name, sub] : properties.items()) {
        if ((!key.empty() && name != key) || !sub.is_object() || !sub.contains("const") ||
            std::find(required.begin(), required.end(), json(name)) == required.end()) {
          continue;
        }
        key = name;
        tagged = tags.insert(CanonicalJson(sub["const"]).dump()).second;
        break;
      }
      if (!tagged) return false;
    }
    return true;
  }

  absl::StatusOr<std::string> Reference(const json& schema, const std::string& path) {
    if (!schema["$ref"].is_string()) return Unsupported(path + "/$ref", "must be a string");
    const std::string ref = schema["$ref"].get<std::string>();
    auto known = refs_.find(ref);
    if (known != refs_.end()) return known->second;
    const json* target = nullptr;
    if (ref == "#") {
      target = &root_;
    } else {
      for (const char* defs : {"#/$defs/", "#/definitions/"}) {
        const std::string prefix = defs;
        if (ref.rfind(prefix, 0) != 0) continue;
        const std::string name = ref.substr(prefix.size());
        auto table = root_.find(prefix.substr(2, prefix.size() - 3));
        if (table == root_.end() || !table->is_object()) continue;
        auto entry = table->find(name);
        if (entry != table->end()) target = &*entry;
      }
    }
    if (target == nullptr) {
      return Unsupported(path + "/$ref", absl::StrCat("'", ref, "' names no schema of this document"));
    }
    // Named before it is compiled, so a recursive reference finds the rule.
    const std::string name = absl::StrCat("s", next_rule_++);
    refs_.emplace(ref, name);
    LINSERVE_ASSIGN_OR_RETURN(std::string body, Visit(*target, ref));
    absl::StrAppend(&rules_, name, " ::= ", body, "\n");
    return name;
  }

  absl::StatusOr<std::string> OfType(const json& schema, const std::string& type,
                                     const std::string& path) {
    if (type == "string") return String(schema, path);
    if (type == "integer") return Integer(schema, path);
    if (type == "number") {
      for (const char* bound : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (schema.contains(bound)) {
          return Unsupported(path, absl::StrCat("'", bound, "' on a number is not supported (only on integers)"));
        }
      }
      return std::string("json-number");
    }
    if (type == "boolean") return std::string("json-boolean");
    if (type == "null") return std::string("json-null");
    if (type == "object") return Object(schema, path);
    if (type == "array") return Array(schema, path);
    return Unsupported(path + "/type", absl::StrCat("'", type, "' is not a JSON type"));
  }

  absl::StatusOr<std::optional<int64_t>> Bound(const json& schema, const char* key, bool lower,
                                               bool exclusive, const std::string& path) {
    if (!schema.contains(key)) return std::optional<int64_t>();
    const json& v = schema[key];
    if (!v.is_number()) return Unsupported(path + "/" + key, "must be a number");
    const double d = v.get<double>();
    if (std::abs(d) > 1e17) return Unsupported(path + "/" + key, "is beyond +-1e17");
    double bound = lower ? std::ceil(d) : std::floor(d);
    if (exclusive && bound == d) bound += lower ? 1 : -1;
    return std::optional<int64_t>(static_cast<int64_t>(bound));
  }

  absl::StatusOr<std::string> Integer(const json& schema, const std::string& path) {
    LINSERVE_ASSIGN_OR_RETURN(std::optional<int64_t> lo, Bound(schema, "minimum", true, false, path));
    LINSERVE_ASSIGN_OR_RETURN(std::optional<int64_t> hi, Bound(schema, "maximum", false, false, path));
    LINSERVE_ASSIGN_OR_RETURN(std::optional<int64_t> xlo, Bound(schema, "exclusiveMinimum", true, true, path));
    LINSERVE_ASSIGN_OR_RETURN(std::optional<int64_t> xhi, Bound(schema, "exclusiveMaximum", false, true, path));
    if (xlo) lo = lo ? std::max(*lo, *xlo) : *xlo;
    if (xhi) hi = hi ? std::min(*hi, *xhi) : *xhi;
    if (!lo && !hi) return std::string("json-int");
    if (lo && hi && *lo > *hi) return Unsupported(path, "no integer lies between its bounds");
    return Rule(IntegerRangeGbnf(lo, hi));
  }

  absl::StatusOr<std::string> String(const json& schema, const std::string& path) {
    const bool lengths = schema.contains("minLength") || schema.contains("maxLength");
    if (schema.contains("format")) {
      const json& format = schema["format"];
      const std::string name = format.is_string() ? format.get<std::string>() : "";
      const std::string body = name == "date" ? "json-date" : name == "time" ? "json-time"
                               : name == "date-time" ? "json-date \"T\" json-time"
                               : name == "uuid" ? "json-uuid" : "";
      if (body.empty()) return Unsupported(path + "/format", absl::StrCat("the format '", format.dump(), "' is not supported (date, time, date-time, uuid are)"));
      if (lengths || schema.contains("pattern")) return Unsupported(path, "format together with pattern or lengths is not supported");
      return Rule("\"\\\"\" " + body + " \"\\\"\"");
    }
    if (schema.contains("pattern")) {
      if (lengths) return Unsupported(path, "pattern together with minLength or maxLength is not supported");
      if (!schema["pattern"].is_string()) return Unsupported(path + "/pattern", "must be a string");
      absl::StatusOr<std::string> body =
          RegexToGbnf(schema["pattern"].get<std::string>(), options_.limits);
      if (!body.ok()) return Unsupported(path + "/pattern", std::string(body.status().message()));
      return Rule("\"\\\"\" " + *body + " \"\\\"\"");
    }
    if (!lengths) return std::string("json-string");
    int64_t min = 0;
    std::optional<int64_t> max;
    for (const char* key : {"minLength", "maxLength"}) {
      if (!schema.contains(key)) continue;
      const json& v = schema[key];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > MaxRepeat()) {
        return Unsupported(path + "/" + key, RepeatRange());
      }
      (std::string(key) == "minLength" ? min : max.emplace()) = v.get<int64_t>();
    }
    if (max && *max < min) return Unsupported(path, "maxLength is below minLength");
    return Rule("\"\\\"\" " + Repeat("json-char", min, max) + " \"\\\"\"");
  }

  absl::StatusOr<std::string> Object(const json& schema, const std::string& path) {
    const json properties = schema.value("properties", json::object());
    if (!properties.is_object()) return Unsupported(path + "/properties", "must be an object");
    const json required = schema.value("required", json::array());
    std::set<std::string> needed;
    for (const json& name : required) {
      if (!name.is_string()) return Unsupported(path + "/required", "must list names");
      needed.insert(name.get<std::string>());
    }
    // Absent, additionalProperties allows any (JSON Schema) or none (strict).
    const json extra =
        schema.value("additionalProperties", json(!options_.strict || properties.empty()));
    std::string extra_pair;
    if (!(extra.is_boolean() && !extra.get<bool>())) {
      LINSERVE_ASSIGN_OR_RETURN(std::string value, Visit(extra, path + "/additionalProperties"));
      LINSERVE_ASSIGN_OR_RETURN(std::string key, OtherKey(properties, path));
      extra_pair = key + " json-ws \":\" json-ws " + value + " json-ws";
    }
    for (const std::string& name : needed) {
      if (!properties.contains(name) && extra_pair.empty()) {
        return Unsupported(path + "/required", absl::StrCat("'", name, "' is required but has no schema in properties"));
      }
    }
    // Pairs in the order of `properties`. first[i]: the pairs from i on when
    // none came before; later[i]: the same after one did (a comma first).
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const auto& [name, sub] : properties.items()) {
      LINSERVE_ASSIGN_OR_RETURN(std::string value, Visit(sub, path + "/properties/" + name));
      pairs.push_back({name, GbnfLiteral(json(name).dump()) + " json-ws \":\" json-ws " + value + " json-ws"});
    }
    const size_t n = pairs.size();
    std::string first = extra_pair.empty() ? "\"\"" : "(" + extra_pair + " (\",\" json-ws " + extra_pair + ")*)?";
    std::string later = extra_pair.empty() ? "\"\"" : "(\",\" json-ws " + extra_pair + ")*";
    for (size_t i = n; i-- > 0;) {
      const std::string& pair = pairs[i].second;
      const bool must = needed.count(pairs[i].first) > 0;
      const std::string first_here = pair + " " + later;
      const std::string later_here = "\",\" json-ws " + pair + " " + later;
      const std::string new_first = must ? first_here : first_here + " | " + first;
      const std::string new_later = must ? later_here : later_here + " | " + later;
      first = Rule(new_first);
      later = Rule(new_later);
    }
    return Rule("\"{\" json-ws " + first + " \"}\"");
  }

  // A key that is none of `properties`' names: otherwise a listed property
  // left out could come back as an additional one with a value its schema
  // refuses. A trie of the names: at each node the key may end (unless a
  // name ends there), leave every name with a character none continues
  // with, or go on with one that does.
  absl::StatusOr<std::string> OtherKey(const json& properties, const std::string& path) {
    if (properties.empty()) return std::string("json-string");
    struct Node {
      std::map<char, int> children;
      bool name_ends = false;
    };
    std::vector<Node> trie(1);
    for (const auto& [name, sub] : properties.items()) {
      int node = 0;
      for (char c : name) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x80 || byte < 0x20 || c == '"' || c == '\\' || byte == 0x7F) {
          return Unsupported(path, "additional properties beside a property whose name is not "
                                   "plain ASCII are not supported");
        }
        auto [it, added] = trie[node].children.try_emplace(c, static_cast<int>(trie.size()));
        if (added) trie.emplace_back();
        node = it->second;
      }
      trie[node].name_ends = true;
    }
    const std::string base = absl::StrCat("key", next_rule_);
    next_rule_ += static_cast<int>(trie.size());
    for (size_t n = 0; n < trie.size(); ++n) {
      std::string others = R"([^"\\\x00-\x1F\x7F)";
      for (const auto& [c, child] : trie[n].children) others += absl::StrFormat("\\x%02X", c);
      std::vector<std::string> alternatives;
      if (!trie[n].name_ends) alternatives.push_back("\"\\\"\"");
      alternatives.push_back(others + "] json-char* \"\\\"\"");
      alternatives.push_back("\"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) json-char* \"\\\"\"");
      for (const auto& [c, child] : trie[n].children) {
        alternatives.push_back(GbnfLiteral(std::string(1, c)) + " " + base + "_" + std::to_string(child));
      }
      absl::StrAppend(&rules_, base, "_", n, " ::= ", absl::StrJoin(alternatives, " | "), "\n");
    }
    return "\"\\\"\" " + base + "_0";
  }

  absl::StatusOr<std::string> Array(const json& schema, const std::string& path) {
    auto count = [&](const char* key, int64_t fallback) -> absl::StatusOr<int64_t> {
      if (!schema.contains(key)) return fallback;
      const json& v = schema[key];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > MaxRepeat()) {
        return Unsupported(path + "/" + key, RepeatRange());
      }
      return v.get<int64_t>();
    };
    LINSERVE_ASSIGN_OR_RETURN(const int64_t min, count("minItems", 0));
    LINSERVE_ASSIGN_OR_RETURN(const int64_t max_given, count("maxItems", -1));
    std::optional<int64_t> max;
    if (max_given >= 0) max = max_given;
    if (max && *max < min) return Unsupported(path, "maxItems is below minItems");
    std::vector<std::string> prefix;
    if (schema.contains("prefixItems")) {
      const json& items = schema["prefixItems"];
      if (!items.is_array()) return Unsupported(path + "/prefixItems", "must be an array");
      for (size_t i = 0; i < items.size(); ++i) {
        LINSERVE_ASSIGN_OR_RETURN(std::string item, Visit(items[i], absl::StrCat(path, "/prefixItems/", i)));
        prefix.push_back(item);
      }
    }
    std::string item = "json-value";
    bool more = true;
    if (schema.contains("items")) {
      const json& items = schema["items"];
      if (items.is_boolean() && !items.get<bool>()) {
        more = false;
      } else {
        LINSERVE_ASSIGN_OR_RETURN(item, Visit(items, path + "/items"));
      }
    }
    const auto k = static_cast<int64_t>(prefix.size());
    if (max && *max < k) prefix.resize(static_cast<size_t>(*max));
    if (!more && min > k) return Unsupported(path, "minItems asks for more items than prefixItems allows");
    // After the prefix: items with the counts left, each after a comma
    // unless it is the first of the array.
    std::string tail = "\"\"";
    if (more && (!max || *max > k)) {
      const int64_t lo = std::max<int64_t>(0, min - k);
      std::optional<int64_t> hi;
      if (max) hi = *max - k;
      const std::string each = item + " json-ws";
      if (k > 0) {
        tail = Repeat("\",\" json-ws " + each, lo, hi);
      } else {
        const std::string rest = Repeat("\",\" json-ws " + each, std::max<int64_t>(0, lo - 1),
                                        hi ? std::optional<int64_t>(*hi - 1) : std::nullopt);
        tail = lo > 0 ? each + " " + rest : "(" + each + " " + rest + ")?";
      }
    }
    // The prefix items, those past minItems optional (and then so is what follows).
    std::string body = tail;
    for (auto i = static_cast<int64_t>(prefix.size()); i-- > 0;) {
      const std::string here = (i == 0 ? "" : "\",\" json-ws ") + prefix[i] + " json-ws " + body;
      body = Rule(i < min ? here : "(" + here + ")?");
    }
    return Rule("\"[\" json-ws " + body + " \"]\"");
  }

  const json& root_;
  const JsonSchemaOptions options_;
  std::string rules_;
  int next_rule_ = 0;
  int depth_ = 0;
  absl::flat_hash_map<std::string, std::string> refs_;
};

}  // namespace

nlohmann::ordered_json CanonicalJson(const nlohmann::ordered_json& value) {
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::trunc(d) == d && std::abs(d) < 1e15) return json(static_cast<int64_t>(d));
    return value;
  }
  if (!value.is_structured()) return value;
  json out = value;
  for (auto& item : out) item = CanonicalJson(item);
  return out;
}

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                             const JsonSchemaOptions& options) {
  return SchemaCompiler(schema, options).Compile();
}

absl::StatusOr<std::string> JsonSchemaTextToGbnf(std::string_view schema_text,
                                                 const JsonSchemaOptions& options) {
  json schema = json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return absl::InvalidArgumentError("json_schema is not valid JSON");
  return JsonSchemaToGbnf(schema, options);
}

std::string JsonObjectGbnf() { return std::string("root ::= json-object\n") + kPrelude; }

}  // namespace linserve
