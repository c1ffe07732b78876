#include "server/common/auth.h"

#include <openssl/crypto.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/base/sha256.h"

namespace linserve {
namespace {

constexpr size_t kMinTokenBytes = 16;

absl::StatusOr<std::string> ReadText(const std::string& what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, " ", path, " cannot be read"));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool ValidTenant(absl::string_view tenant) {
  if (tenant.empty() || tenant.size() > 64) return false;
  for (char c : tenant) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

bool ValidToken(absl::string_view token) {
  if (token.size() < kMinTokenBytes) return false;
  for (char c : token) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<TokenEntry>> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadText("--auth_tokens_file", path);
  if (!text.ok()) return text.status();
  std::vector<TokenEntry> entries;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(path, ":", line_number, ": ");
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(where, "expected \"TOKEN TENANT\""));
    }
    if (!ValidToken(fields[0])) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "a token is at least ", kMinTokenBytes, " bytes of printable ASCII"));
    }
    if (!ValidTenant(fields[1])) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "a tenant is 1-64 of [A-Za-z0-9_.-]"));
    }
    const std::string digest = Sha256Digest({std::string_view(fields[0].data(), fields[0].size())});
    for (const TokenEntry& e : entries) {
      if (e.token_sha256 == digest) {
        return absl::InvalidArgumentError(absl::StrCat(where, "the token is listed twice"));
      }
    }
    entries.push_back({digest, std::string(fields[1])});
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has no tokens"));
  }
  return entries;
}

absl::StatusOr<std::string> TenantOfAuthorization(const std::vector<TokenEntry>& tokens,
                                                  std::optional<absl::string_view> authorization) {
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError("missing authorization: Bearer <token>");
  }
  absl::string_view value = *authorization;
  if (!absl::ConsumePrefix(&value, "Bearer ")) {
    return absl::UnauthenticatedError("authorization must be \"Bearer <token>\"");
  }
  const std::string digest = Sha256Digest({std::string_view(value.data(), value.size())});
  const TokenEntry* match = nullptr;
  for (const TokenEntry& entry : tokens) {
    // Every entry is compared, whatever matched before.
    const bool equal = CRYPTO_memcmp(entry.token_sha256.data(), digest.data(), digest.size()) == 0;
    if (equal) match = &entry;
  }
  if (match == nullptr) return absl::UnauthenticatedError("unknown token");
  return match->tenant;
}

BearerTokenProcessor::BearerTokenProcessor(std::vector<TokenEntry> tokens)
    : tokens_(std::move(tokens)) {}

grpc::Status BearerTokenProcessor::Process(const InputMetadata& auth_metadata,
                                           grpc::AuthContext* context,
                                           OutputMetadata* consumed_auth_metadata,
                                           OutputMetadata*) {
  // Probes need no secret (see the policy in auth.h).
  const auto path = auth_metadata.find(":path");
  if (path != auth_metadata.end() &&
      absl::StartsWith(absl::string_view(path->second.data(), path->second.size()),
                       "/grpc.health.v1.Health/")) {
    return grpc::Status::OK;
  }
  const auto header = auth_metadata.find("authorization");
  const absl::StatusOr<std::string> tenant = TenantOfAuthorization(
      tokens_, header == auth_metadata.end()
                   ? std::nullopt
                   : std::optional<absl::string_view>(
                         absl::string_view(header->second.data(), header->second.size())));
  if (!tenant.ok()) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                        std::string(tenant.status().message()));
  const auto existing = context->FindPropertyValues(kTenantProperty);
  if (!existing.empty()) {
    if (existing.front() != *tenant) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this connection belongs to another tenant; open a new one");
    }
  } else {
    context->AddProperty(kTenantProperty, *tenant);
  }
  consumed_auth_metadata->insert({"authorization", std::string(header->second.data(),
                                                               header->second.size())});
  return grpc::Status::OK;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options) {
  const bool tls = !options.cert_file.empty() || !options.key_file.empty();
  if (!tls) {
    if (!options.client_ca_file.empty() || !options.tokens_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca_file and --auth_tokens_file need --tls_cert_file and --tls_key_file");
    }
    return grpc::InsecureServerCredentials();
  }
  absl::StatusOr<std::string> cert = ReadText("--tls_cert_file", options.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadText("--tls_key_file", options.key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!options.client_ca_file.empty()) {
    absl::StatusOr<std::string> roots = ReadText("--tls_client_ca_file", options.client_ca_file);
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *roots;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(ssl);
  if (!options.tokens_file.empty()) {
    absl::StatusOr<std::vector<TokenEntry>> tokens = ReadTokenFile(options.tokens_file);
    if (!tokens.ok()) return tokens.status();
    credentials->SetAuthMetadataProcessor(
        std::make_shared<BearerTokenProcessor>(*std::move(tokens)));
  }
  return credentials;
}

}  // namespace linserve
