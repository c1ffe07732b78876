#include "server/store/state_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/base/sha256.h"
#include "engine/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

using nlohmann::json;

constexpr char kMagic[8] = {'L', 'N', 'S', 'V', 'S', 'T', 'A', 'T'};
constexpr size_t kChecksumBytes = 32;
// magic, version, header length, payload length, checksum (version 1)
constexpr size_t kFixedBytes = 8 + 4 + 4 + 8 + kChecksumBytes;
// Version 2's token count, version 3's two chat lengths.
constexpr size_t kTokenCountBytes = 8;
constexpr size_t kChatLengthBytes = 8;

void AppendLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t ReadLittleEndian(std::string_view bytes, size_t offset, int width) {
  uint64_t value = 0;
  for (int i = 0; i < width; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

std::string Checksum(std::string_view bytes) { return Sha256Digest({bytes}); }

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("state file: ", what));
}

// header[key] as an integer of type T. nlohmann's get<T>() converts any
// number: a float past T's range is undefined behaviour, an integer out of
// range wraps. Both come only from a crafted file (a client can reseal one
// with a valid checksum for ImportSession), so they are refused here.
// A missing key or a non-number throws json::exception as get<T>() would.
template <typename T>
absl::StatusOr<T> HeaderInteger(const json& header, const char* key) {
  const json& value = header.at(key);
  if (!value.is_number()) return value.get<T>();  // throws the type error
  bool in_range = false;
  if (value.is_number_unsigned()) {
    in_range = value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if (value.is_number_integer()) {
    in_range = std::numeric_limits<T>::is_signed || value.get<int64_t>() >= 0;
  }
  if (!in_range) {
    return Corrupt(absl::StrCat("header: ", key, " = ", value.dump(),
                                " is not an integer in the range of ", sizeof(T) * 8, "-bit ",
                                std::numeric_limits<T>::is_signed ? "signed" : "unsigned",
                                " integers"));
  }
  return value.get<T>();
}

}  // namespace

std::string EncodeStateFile(const SessionRecord& record) {
  return EncodeStateFile(record, record.payload);
}

std::string EncodeStateFile(const SessionRecord& r, std::string_view payload) {
  json fields = json{{"model_fingerprint", r.model_fingerprint},
                    {"tenant", r.tenant},
                    {"session_id", r.session_id},
                    {"position", r.position},
                    {"pending_token", r.pending_token},
                    {"rng_seed", r.rng_seed},
                    {"rng_draws", r.rng_draws},
                    {"created_unix_ms", r.created_unix_ms},
                    {"last_used_unix_ms", r.last_used_unix_ms}};
  // Only named states have a source; sessions' headers stay as they were.
  if (!r.source.empty()) fields["source"] = r.source;
  if (!r.origin.empty()) fields["origin"] = r.origin;
  const std::string header = fields.dump();
  std::string out(kMagic, sizeof(kMagic));
  out.reserve(kFixedBytes + header.size() + payload.size() + kTokenCountBytes +
              4 * r.tokens.size() + 2 * kChatLengthBytes + r.chat.context.size() +
              r.chat.reply.size());
  AppendLittleEndian(out, kStateFormatVersion, 4);
  AppendLittleEndian(out, header.size(), 4);
  out += header;
  AppendLittleEndian(out, payload.size(), 8);
  out += payload;
  AppendLittleEndian(out, r.tokens.size(), 8);
  for (int32_t token : r.tokens) AppendLittleEndian(out, static_cast<uint32_t>(token), 4);
  for (const std::string* text : {&r.chat.context, &r.chat.reply}) {
    AppendLittleEndian(out, text->size(), kChatLengthBytes);
    out += *text;
  }
  out += Checksum(out);
  return out;
}

namespace {

// DecodeStateFile, with the checksum of the bytes before the file's own last
// 32 given (`body_checksum`) or computed here (nullptr).
absl::StatusOr<SessionRecord> Decode(std::string_view bytes, int64_t max_bytes,
                                     const std::string* body_checksum) {
  if (static_cast<int64_t>(bytes.size()) > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("state file: ", bytes.size(),
                                                     " bytes is over the limit of ", max_bytes));
  }
  if (bytes.size() < kFixedBytes) {
    return Corrupt(absl::StrCat(bytes.size(), " bytes is shorter than the smallest file (",
                                kFixedBytes, ")"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return Corrupt("bad magic");
  const uint64_t header_bytes = ReadLittleEndian(bytes, 12, 4);
  if (header_bytes > static_cast<uint64_t>(kMaxStateHeaderBytes) ||
      header_bytes > bytes.size() - kFixedBytes) {
    return Corrupt(absl::StrCat("header length ", header_bytes, " does not fit the file"));
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
  const uint64_t version = ReadLittleEndian(bytes, 8, 4);
  const bool known_version = version >= 1 && version <= kStateFormatVersion;
  // Another version's layout is not known: only its checksum is checked.
  const size_t payload_at = 16 + header_bytes + 8;
  const uint64_t payload_bytes = ReadLittleEndian(bytes, 16 + header_bytes, 8);
  const size_t after_payload = bytes.size() - payload_at - kChecksumBytes;
  const size_t token_section = version >= 2 ? kTokenCountBytes : 0;
  if (known_version && (payload_bytes > after_payload || after_payload - payload_bytes <
                                                             token_section)) {
    return Corrupt(absl::StrCat("payload length ", payload_bytes, " does not match the file"));
  }
  uint64_t token_count = 0;
  // Version 3's chat texts: where each begins, and its length.
  size_t chat_at[2] = {0, 0};
  uint64_t chat_bytes[2] = {0, 0};
  if (known_version && version >= 2) {
    token_count = ReadLittleEndian(bytes, payload_at + payload_bytes, kTokenCountBytes);
    const size_t rest = after_payload - payload_bytes - kTokenCountBytes;
    const size_t chat_section = version >= 3 ? 2 * kChatLengthBytes : 0;
    if (token_count > (rest - std::min(rest, chat_section)) / 4 ||
        (version == 2 && token_count * 4 != rest)) {
      return Corrupt(absl::StrCat("token count ", token_count, " does not match the file"));
    }
    if (version >= 3) {
      size_t at = payload_at + payload_bytes + kTokenCountBytes + 4 * token_count;
      for (int i = 0; i < 2; ++i) {
        const size_t left = bytes.size() - kChecksumBytes - at;
        if (left < kChatLengthBytes) return Corrupt("the chat section does not fit the file");
        chat_bytes[i] = ReadLittleEndian(bytes, at, kChatLengthBytes);
        at += kChatLengthBytes;
        if (chat_bytes[i] > left - kChatLengthBytes) {
          return Corrupt(absl::StrCat("chat length ", chat_bytes[i], " does not fit the file"));
        }
        chat_at[i] = at;
        at += chat_bytes[i];
      }
      if (at != bytes.size() - kChecksumBytes) {
        return Corrupt("the chat section does not end where the file does");
      }
    }
  } else if (known_version && payload_bytes != after_payload) {
    return Corrupt(absl::StrCat("payload length ", payload_bytes, " does not match the file"));
  }
  if ((body_checksum != nullptr ? *body_checksum : Checksum(body)) != bytes.substr(body.size())) {
    return Corrupt("checksum mismatch");
  }

  // From here the bytes are as written; what follows is about their format.
  if (!known_version) {
    return absl::FailedPreconditionError(absl::StrCat("state file: format version ", version,
                                                      " is not a supported one (1 to ",
                                                      kStateFormatVersion, ")"));
  }
  const json header = json::parse(bytes.substr(16, header_bytes), nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return Corrupt("header is not a JSON object");
  SessionRecord r;
  try {
    r.model_fingerprint = header.at("model_fingerprint").get<std::string>();
    r.tenant = header.at("tenant").get<std::string>();
    r.session_id = header.at("session_id").get<std::string>();
    LINSERVE_ASSIGN_OR_RETURN(r.position, HeaderInteger<int64_t>(header, "position"));
    LINSERVE_ASSIGN_OR_RETURN(r.pending_token, HeaderInteger<int64_t>(header, "pending_token"));
    LINSERVE_ASSIGN_OR_RETURN(r.rng_seed, HeaderInteger<uint64_t>(header, "rng_seed"));
    LINSERVE_ASSIGN_OR_RETURN(r.rng_draws, HeaderInteger<uint64_t>(header, "rng_draws"));
    LINSERVE_ASSIGN_OR_RETURN(r.created_unix_ms,
                              HeaderInteger<int64_t>(header, "created_unix_ms"));
    LINSERVE_ASSIGN_OR_RETURN(r.last_used_unix_ms,
                              HeaderInteger<int64_t>(header, "last_used_unix_ms"));
    if (header.contains("source")) r.source = header.at("source").get<std::string>();
    if (header.contains("origin")) r.origin = header.at("origin").get<std::string>();
  } catch (const json::exception& e) {
    return Corrupt(absl::StrCat("header: ", e.what()));
  }
  if (r.position < 0) return Corrupt(absl::StrCat("position ", r.position, " is negative"));
  if (r.pending_token < -1) {
    return Corrupt(absl::StrCat("pending_token ", r.pending_token, " is below -1"));
  }
  if (token_count != 0 && static_cast<int64_t>(token_count) != r.position) {
    return Corrupt(
        absl::StrCat("token count ", token_count, " is neither 0 nor the position ", r.position));
  }
  r.payload = std::string(bytes.substr(payload_at, payload_bytes));
  r.tokens.resize(token_count);
  const size_t tokens_at = payload_at + payload_bytes + kTokenCountBytes;
  for (uint64_t i = 0; i < token_count; ++i) {
    r.tokens[i] = static_cast<int32_t>(static_cast<uint32_t>(ReadLittleEndian(bytes, tokens_at + 4 * i, 4)));
  }
  r.chat.context = std::string(bytes.substr(chat_at[0], chat_bytes[0]));
  r.chat.reply = std::string(bytes.substr(chat_at[1], chat_bytes[1]));
  return r;
}

absl::StatusOr<SessionRecord> OfModel(absl::StatusOr<SessionRecord> record,
                                      std::string_view fingerprint) {
  if (record.ok() && record->model_fingerprint != fingerprint) {
    return absl::FailedPreconditionError(
        absl::StrCat("state file: of model ", record->model_fingerprint.substr(0, 12),
                     "..., not the served model ", std::string(fingerprint.substr(0, 12)),
                     "..."));
  }
  return record;
}

}  // namespace

absl::StatusOr<SessionRecord> DecodeStateFile(std::string_view bytes, int64_t max_bytes) {
  return Decode(bytes, max_bytes, nullptr);
}

absl::StatusOr<SessionRecord> DecodeStateFileOfModel(std::string_view bytes, int64_t max_bytes,
                                                     std::string_view fingerprint) {
  return OfModel(Decode(bytes, max_bytes, nullptr), fingerprint);
}

StateFileAssembler::StateFileAssembler(size_t expected_bytes) { bytes_.reserve(expected_bytes); }

void StateFileAssembler::Append(std::string_view piece) {
  bytes_.append(piece.data(), piece.size());
  if (bytes_.size() > hashed_ + kChecksumBytes) {
    const size_t end = bytes_.size() - kChecksumBytes;
    body_checksum_.Update(std::string_view(bytes_).substr(hashed_, end - hashed_));
    hashed_ = end;
  }
}

absl::StatusOr<SessionRecord> StateFileAssembler::Decode(int64_t max_bytes,
                                                         std::string_view fingerprint) {
  // A file too short to hold a checksum is refused before the checksum
  // matters; `hashed_` covers the body of any other.
  const std::string checksum = body_checksum_.Digest();
  return OfModel(linserve::Decode(bytes_, max_bytes, &checksum), fingerprint);
}

}  // namespace linserve
