#ifndef LINSERVE_ENGINE_JINJA_JINJA_PERCENT_FORMAT_H_
#define LINSERVE_ENGINE_JINJA_JINJA_PERCENT_FORMAT_H_

// Python's printf-style string formatting, `format % args`, which Jinja's
// `%` operator on a string and its `format` filter are: templates write
// tool calls with "%s"|format(value) (Llama 3.2's and 4's pythonic tool
// templates). Written here because no C++ library formats Python's way
// (repr for %r, str() of lists and None for %s, Python's errors); the
// numbers themselves go through snprintf, whose conversions Python's match.
// Internal to engine/jinja/.

#include <string>

#include "engine/jinja/jinja_interpreter.h"
#include "engine/jinja/jinja_value.h"

namespace linserve::jinja {

// `args` is a tuple of the values, a dict for %(key)s, or one value. A safe
// format (Markup) escapes what %s and %r insert and gives a safe string. Throws
// RenderError with Python's TypeError or ValueError text where Python
// raises one (too few or too many values, a number's conversion of a
// string, an unknown conversion); widths and the text made are counted
// against `in`'s output limit as they grow.
Value PercentFormat(Interpreter& in, const Value& format, const Value& args);

}  // namespace linserve::jinja

#endif  // LINSERVE_ENGINE_JINJA_JINJA_PERCENT_FORMAT_H_
