#ifndef LINSERVE_SERVER_AUTH_H_
#define LINSERVE_SERVER_AUTH_H_

// Transport security and bearer-token authentication.
//
// Policy (also in server/README.md):
// - TLS with --tls_cert_file/--tls_key_file; mTLS when --tls_client_ca_file
//   is set (a client without a certificate that CA signed cannot connect).
// - Bearer tokens (--auth_tokens_file, needs TLS): every RPC must carry
//   "authorization: Bearer <token>", except the grpc.health.v1 service, so
//   that probes need no secret. A missing or unknown token is
//   UNAUTHENTICATED. The token's tenant owns every session it creates;
//   another tenant's sessions answer NOT_FOUND exactly like unknown ids.
// - One connection serves one tenant: a call bearing another tenant's token
//   on a connection already used by a tenant is UNAUTHENTICATED (gRPC keeps
//   authentication properties per connection).
// - /metrics is plain HTTP with no tenant or session data in it; bind it to a
//   private address with --metrics_host.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace linserve {

// The auth-context property that carries the caller's tenant (TenantOf).
inline constexpr char kTenantProperty[] = "linserve-tenant";

struct TokenEntry {
  std::string token_sha256;  // raw 32-byte digest: tokens are not kept in memory
  std::string tenant;
};

// Reads a token file: one "TOKEN TENANT" per line, blank lines and lines
// starting with '#' ignored. Tokens are at least 16 bytes of printable ASCII,
// tenants 1-64 of [A-Za-z0-9_.-]; errors name the line.
absl::StatusOr<std::vector<TokenEntry>> ReadTokenFile(const std::string& path);

// The tenant of an authorization header's value ("Bearer <token>"; nullopt:
// no header), checked in constant time (SHA-256 of the presented token
// compared with every entry's digest, no early exit); UNAUTHENTICATED
// naming what is wrong otherwise. Both transports (gRPC, HTTP) use it.
absl::StatusOr<std::string> TenantOfAuthorization(const std::vector<TokenEntry>& tokens,
                                                  std::optional<absl::string_view> authorization);

// Checks "authorization: Bearer <token>" in constant time (SHA-256 of the
// presented token compared with every entry's digest, no early exit) and
// puts the tenant on the connection's auth context.
class BearerTokenProcessor : public grpc::AuthMetadataProcessor {
 public:
  explicit BearerTokenProcessor(std::vector<TokenEntry> tokens);

  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const std::vector<TokenEntry> tokens_;
};

struct TlsOptions {
  std::string cert_file;       // PEM certificate chain
  std::string key_file;        // PEM private key
  std::string client_ca_file;  // PEM roots; set: require and verify client certificates
  std::string tokens_file;     // set: bearer tokens (TLS required)
};

// Insecure credentials when no TLS option is set; otherwise TLS (mTLS) with
// the token processor attached when a token file is given.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options);

}  // namespace linserve

#endif  // LINSERVE_SERVER_AUTH_H_
