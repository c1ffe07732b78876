#ifndef LINSERVE_SERVER_HTTP_PLAYGROUND_ASSETS_H_
#define LINSERVE_SERVER_HTTP_PLAYGROUND_ASSETS_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace linserve {

// One file of the playground page (server/http/playground/), embedded in the
// binary at build time: the page needs no files beside the server and no
// build step of its own.
struct PlaygroundAsset {
  absl::string_view path;  // "/", "/playground.js", "/playground.css"
  absl::string_view content_type;
  absl::string_view body;
};

const std::vector<PlaygroundAsset>& PlaygroundAssets();

// What the page may load and talk to: only this server. Sent with every
// asset.
inline constexpr char kPlaygroundContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_PLAYGROUND_ASSETS_H_
