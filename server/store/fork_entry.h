#ifndef LINSERVE_SERVER_FORK_ENTRY_H_
#define LINSERVE_SERVER_FORK_ENTRY_H_

// A fork stored by reference (DiskStateStore::PutFork): until the fork's
// first own write, its entry is a small link file, which holds only what
// differs from its source's state file (tenant, session id, created and
// last-used times), beside a hard link to the source's file as it was at
// the fork. A fork's state is its source's, so this holds the same file as
// writing it whole, for the cost of a few hundred bytes however long the
// session (a Qwen3.5 session's KV cache is megabytes per hundred tokens).
//
// The link file: the magic "LNSVFORK", then a JSON object {tenant,
// session_id, created_unix_ms, last_used_unix_ms}, then the SHA-256 (32
// bytes) of everything before it.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/store/state_file.h"

namespace linserve {

// True when `bytes` begin as a link file (a state file begins "LNSVSTAT").
bool IsForkLink(std::string_view bytes);

// The link file of a fork whose own fields are `header`'s.
std::string EncodeForkLink(const SessionRecord& header);

// The fork's state file: `base` (its source's file) with the link's fields.
// DATA_LOSS when either is damaged.
absl::StatusOr<std::string> AssembleForkFile(std::string_view link, std::string_view base);

}  // namespace linserve

#endif  // LINSERVE_SERVER_FORK_ENTRY_H_
