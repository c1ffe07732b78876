#ifndef LINSERVE_ENGINE_JINJA_JINJA_VALUE_H_
#define LINSERVE_ENGINE_JINJA_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "nlohmann/json.hpp"

namespace linserve::jinja {

// An error while rendering: the interpreter throws it from deep inside an
// expression and Template::Render turns it into an absl::Status, so no
// partial state escapes. It never leaves this folder.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Value;
using List = std::vector<Value>;

// A dictionary that keeps insertion order, as Python's does: templates print
// tools' JSON schemas with `tojson`, and the reference keeps their key order.
// Keys are what Python hashes: strings (all a JSON context gives), none,
// booleans, numbers and tuples of them ({512: 128} in a template), with 1,
// 1.0 and true one key. Strings are looked up without building a key.
class Dict {
 public:
  const Value* Find(const std::string& key) const;
  // nullptr when absent; throws RenderError for a list or dict (unhashable).
  const Value* Find(const Value& key) const;
  void Set(const std::string& key, Value value);
  // The first key written stays, as in Python ({1: 'a'} then [1.0] = 'b').
  void Set(const Value& key, Value value);
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::pair<Value, Value>> items_;
  absl::flat_hash_map<std::string, size_t> string_index_;
  absl::flat_hash_map<std::string, size_t> other_index_;  // by OtherKey
};

// Arguments of a call: positional, then keyword in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword argument `name`, else positional[index], else nullptr.
  const Value* Get(size_t index, std::string_view name) const;
};
using Function = std::function<Value(CallArgs&)>;

// A template value: Jinja's undefined, none, booleans, integers, floats,
// strings, lists (tuples among them), dicts (namespaces are dicts whose attributes can be set)
// and callables (macros, `raise_exception`, methods bound to their object).
// Lists and dicts are shared, as Python's objects are.
class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  // Python's Markup, which `safe` and `escape` give: printed as it is, it
  // escapes what is added to it with + (Markup('<b>') + '<' is '<b>&lt;')
  // and is not escaped again.
  static Value SafeString(std::string s);
  static Value MakeList(List items = {});
  // A list that prints as Python's tuple, ('a', 1), and equals no list.
  static Value MakeTuple(List items);
  static Value MakeDict(bool is_namespace = false);
  static Value MakeFunction(Function f);
  // JSON into values (objects keep their order); numbers stay integers or floats.
  static Value FromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_namespace() const { return kind_ == Kind::kDict && is_namespace_; }
  bool is_tuple() const { return kind_ == Kind::kList && is_tuple_; }
  bool is_safe() const { return kind_ == Kind::kString && is_safe_; }

  bool boolean() const { return bool_; }
  int64_t integer() const { return int_; }
  double number() const { return kind_ == Kind::kInt ? static_cast<double>(int_) : float_; }
  const std::string& string() const { return string_; }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const Function& function() const { return *function_; }

  // Python's truth: empty strings, lists and dicts, zero, none and undefined are false.
  bool Truthy() const;
  // str(value) as Python prints it: True/False, None, 2.5, ['a', 1], {'k': 'v'}.
  std::string Str() const;
  // repr(value): strings quoted as Python quotes them.
  std::string Repr() const;
  // Python's ==, across kinds: 1 == 1.0, lists and dicts element-wise.
  bool Equals(const Value& other) const;
  // json.dumps(value, ensure_ascii=False, indent, separators, sort_keys) as
  // transformers' `tojson` calls it. Undefined is null.
  struct JsonFormat {
    int indent = -1;  // -1: none
    std::string item_separator = ", ";
    std::string key_separator = ": ";
    bool sort_keys = false;
  };
  std::string ToJson(const JsonFormat& format) const;
  // A number as json.dumps writes it: 3, 2.5, NaN, Infinity.
  void AppendJsonNumber(std::string& out) const;
  const char* TypeName() const;

 private:
  void AppendJson(const JsonFormat& format, int depth, std::string& out) const;

  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool is_namespace_ = false;
  bool is_tuple_ = false;
  bool is_safe_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string string_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> function_;
};

// A Python float as repr prints it: 2.5, 1.0, 1e+16, inf.
std::string FloatRepr(double f);
// A string as a JSON string: quotes, backslash escapes, \u00XX for other
// control characters, everything else (non-ASCII included) as it is.
void AppendJsonString(std::string_view s, std::string& out);
// Code points of UTF-8 text (an invalid byte stands for itself) and back.
std::u32string DecodeUtf8(std::string_view s);
std::string EncodeUtf8(std::u32string_view s);

}  // namespace linserve::jinja

#endif  // LINSERVE_ENGINE_JINJA_JINJA_VALUE_H_
