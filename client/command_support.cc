#include "client/command_support.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include <google/protobuf/util/json_util.h>

namespace linserve {

int Failed(const grpc::Status& status) {
  std::fprintf(stderr, "error: %s: %s\n", StatusCodeName(status.error_code()).c_str(),
               status.error_message().c_str());
  return 1;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "usage: %s\n", message.c_str());
  return 2;
}

void PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  std::printf("%s\n", json.c_str());
}

std::unique_ptr<v1::Linserve::Stub> StubOrNull(const ConnectionOptions& connection) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(connection);
  if (!channel.ok()) {
    std::fprintf(stderr, "error: %s\n", channel.status().ToString().c_str());
    return nullptr;
  }
  return v1::Linserve::NewStub(*channel);
}

absl::StatusOr<std::string> ReadInput(const std::string& file) {
  if (file.empty() || file == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), {});
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read " + file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace linserve
