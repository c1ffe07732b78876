#ifndef LINSERVE_SERVER_OPENAI_REQUEST_JSON_H_
#define LINSERVE_SERVER_OPENAI_REQUEST_JSON_H_

#include <nlohmann/json.hpp>

namespace linserve {

// A request body with its keys in the order they were sent: a json_schema's
// properties (and a tool's parameters) are generated in that order.
using RequestJson = nlohmann::ordered_json;

}  // namespace linserve

#endif  // LINSERVE_SERVER_OPENAI_REQUEST_JSON_H_
