#ifndef LINSERVE_ENGINE_JINJA_JINJA_BUILTIN_HELPERS_H_
#define LINSERVE_ENGINE_JINJA_JINJA_BUILTIN_HELPERS_H_

// What the filters and the methods share: Python's string operations and
// the views of a value as a list. Internal to engine/jinja/.

#include <cstdint>
#include <string>

#include "engine/jinja/jinja_interpreter.h"
#include "engine/jinja/jinja_value.h"

namespace linserve::jinja {

// str.isspace() of one code point.
bool IsPythonSpace(char32_t c);
// str.strip/lstrip/rstrip(chars): whitespace when chars is null or none.
std::string Strip(const std::string& s, const Value* chars, bool left, bool right);
// The string argument `name` (or positional `index`), else an error naming `what`.
const std::string& StringArg(const CallArgs& args, size_t index, const std::string& name,
                             const std::string& what);
// str.split(sep=None, maxsplit=-1).
Value Split(Interpreter& in, const std::string& s, const CallArgs& args);
// str.replace(old, new, count); count < 0: all.
std::string Replace(Interpreter& in, const std::string& s, const std::string& from,
                    const std::string& to, int64_t count);
// str.startswith / endswith, with a string or a tuple of them.
bool StartsOrEnds(const std::string& s, const Value& what, bool start);
// str.capitalize(), str.title(), Jinja's title filter, str.lower(),
// str.upper(): each code point by Unicode's simple case mapping.
std::string Capitalize(const std::string& s);
std::string Title(const std::string& s);
std::string TitleFilter(const std::string& s);
std::string Lower(const std::string& s);
std::string Upper(const std::string& s);
// str.islower() (upper false) or str.isupper() (upper true): some cased
// code point, and every one of that case.
bool IsPythonLower(const std::string& s, bool upper);
// Python's int(s, base) for base 0 or 2 to 36 (ASCII digits): kTooLarge
// where Python's answer is past 64 bits.
enum class PythonNumber { kValid, kInvalid, kTooLarge };
PythonNumber ParsePythonInt(const std::string& s, int base, int64_t* out);
// Python's float(s); false where Python raises ValueError.
bool ParsePythonFloat(const std::string& s, double* out);
// len(): code points of a string, items of a list or dict.
int64_t Length(const Value& v);
// list(): a list's items, a dict's keys, a string's characters.
List ToList(const Value& v);
// dict.items() as a list of (key, value) tuples.
Value Items(const Value& v);
// markupsafe's escape(): & < > " ' as HTML entities, a safe string
// (Markup) as it is; the result is safe.
Value Escape(const Value& v);
// `text` as a string that is safe where `like` is (Markup's methods give
// Markup).
Value SameSafety(const Value& like, std::string text);
// An item's attribute by a dotted path (`function.name`), as Jinja's attrgetter.
Value Attribute(const Value& item, const std::string& path);

}  // namespace linserve::jinja

#endif  // LINSERVE_ENGINE_JINJA_JINJA_BUILTIN_HELPERS_H_
