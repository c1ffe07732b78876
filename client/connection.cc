#include "client/connection.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const ConnectionOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_cert_file.empty()) {
      absl::StatusOr<std::string> roots = ReadText(options.ca_cert_file);
      if (!roots.ok()) return roots.status();
      ssl.pem_root_certs = *roots;
    }
    if (!options.client_cert_file.empty() || !options.client_key_file.empty()) {
      absl::StatusOr<std::string> cert = ReadText(options.client_cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadText(options.client_key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments arguments;
  // Large state files come back from ExportSession in chunks, but a model's
  // info or a long completion may exceed the 4 MB default.
  arguments.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(options.server, credentials, arguments);
}

void PrepareCall(const ConnectionOptions& options, const std::string& session_id,
                 grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  if (!options.token.empty()) context.AddMetadata("authorization", "Bearer " + options.token);
  if (!session_id.empty()) context.AddMetadata("x-session-id", session_id);
}

std::string StatusCodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

}  // namespace linserve
