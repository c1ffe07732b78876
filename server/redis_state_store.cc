#include "server/redis_state_store.h"

#include <hiredis/hiredis.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace linserve {

absl::StatusOr<RedisAddress> ParseRedisUrl(const std::string& url) {
  auto bad = [&url](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--store = \"", url, "\": ", why,
                                                   " (expected redis://HOST:PORT[/DB][?prefix=NAME])"));
  };
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "redis://")) return bad("not a redis:// URL");
  RedisAddress address;
  std::pair<absl::string_view, absl::string_view> query = absl::StrSplit(rest, absl::MaxSplits('?', 1));
  rest = query.first;
  if (!query.second.empty()) {
    absl::string_view option = query.second;
    if (!absl::ConsumePrefix(&option, "prefix=") || option.empty()) return bad("unknown option");
    address.prefix = std::string(option);
  }
  std::pair<absl::string_view, absl::string_view> path = absl::StrSplit(rest, absl::MaxSplits('/', 1));
  if (!path.second.empty() && !absl::SimpleAtoi(path.second, &address.db)) return bad("bad DB number");
  std::pair<absl::string_view, absl::string_view> host_port =
      absl::StrSplit(path.first, absl::MaxSplits(':', 1));
  address.host = std::string(host_port.first);
  if (address.host.empty()) return bad("no host");
  if (!host_port.second.empty() &&
      (!absl::SimpleAtoi(host_port.second, &address.port) || address.port <= 0 ||
       address.port > 65535)) {
    return bad("bad port");
  }
  return address;
}

void RedisStateStore::ReplyDeleter::operator()(redisReply* reply) const { freeReplyObject(reply); }

RedisStateStore::RedisStateStore(RedisAddress address, absl::Duration ttl, absl::Duration timeout)
    : address_(std::move(address)), ttl_(ttl), timeout_(timeout) {}

RedisStateStore::~RedisStateStore() {
  absl::MutexLock lock(&mu_);
  if (context_ != nullptr) redisFree(context_);
}

absl::StatusOr<std::unique_ptr<RedisStateStore>> RedisStateStore::Open(const RedisAddress& address,
                                                                       absl::Duration ttl,
                                                                       absl::Duration timeout) {
  std::unique_ptr<RedisStateStore> store(new RedisStateStore(address, ttl, timeout));
  // Fail at start when Redis is not there; later calls reconnect.
  absl::StatusOr<Reply> pong = store->Run({"PING"});
  if (!pong.ok()) return pong.status();
  return store;
}

absl::Status RedisStateStore::Connect() {
  if (context_ != nullptr && context_->err == 0) return absl::OkStatus();
  if (context_ != nullptr) {
    redisFree(context_);
    context_ = nullptr;
  }
  const timeval tv = absl::ToTimeval(timeout_);
  redisContext* context = redisConnectWithTimeout(address_.host.c_str(), address_.port, tv);
  const std::string where = absl::StrCat("redis at ", address_.host, ":", address_.port);
  if (context == nullptr || context->err != 0) {
    const std::string error = context ? context->errstr : "cannot allocate a context";
    if (context) redisFree(context);
    return absl::UnavailableError(absl::StrCat(where, ": ", error));
  }
  redisSetTimeout(context, tv);
  context_ = context;
  if (address_.db != 0) {
    redisReply* reply =
        static_cast<redisReply*>(redisCommand(context_, "SELECT %d", address_.db));
    const bool ok = reply != nullptr && reply->type != REDIS_REPLY_ERROR;
    if (reply) freeReplyObject(reply);
    if (!ok) {
      redisFree(context_);
      context_ = nullptr;
      return absl::UnavailableError(absl::StrCat(where, ": SELECT ", address_.db, " failed"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisStateStore::Reply> RedisStateStore::Run(const std::vector<std::string>& argv) {
  absl::MutexLock lock(&mu_);
  if (absl::Status connected = Connect(); !connected.ok()) return connected;
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  Reply reply(static_cast<redisReply*>(
      redisCommandArgv(context_, static_cast<int>(args.size()), args.data(), lengths.data())));
  if (reply == nullptr) {
    const std::string error = context_->errstr;
    redisFree(context_);  // a broken connection is replaced on the next call
    context_ = nullptr;
    return absl::UnavailableError(
        absl::StrCat("redis at ", address_.host, ":", address_.port, ": ", error));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    const std::string error(reply->str, reply->len);
    if (absl::StartsWith(error, "OOM")) {
      return absl::ResourceExhaustedError(absl::StrCat("redis is out of memory: ", error));
    }
    return absl::UnavailableError(absl::StrCat("redis: ", error));
  }
  return reply;
}

std::string RedisStateStore::KeyOf(const StoredSessionKey& key) const {
  return absl::StrCat(address_.prefix, ":session:", StoredSessionName(key));
}

absl::Status RedisStateStore::Put(const StoredSessionKey& key, const std::string& state_file) {
  std::vector<std::string> argv = {"SET", KeyOf(key), state_file};
  if (ttl_ > absl::ZeroDuration()) {
    argv.push_back("PX");
    argv.push_back(absl::StrCat(absl::ToInt64Milliseconds(ttl_)));
  }
  return Run(argv).status();
}

absl::StatusOr<std::string> RedisStateStore::Get(const StoredSessionKey& key) {
  absl::StatusOr<Reply> reply = Run({"GET", KeyOf(key)});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type == REDIS_REPLY_NIL) {
    return absl::NotFoundError(absl::StrCat("no stored state for session ", key.session_id));
  }
  return std::string((*reply)->str, (*reply)->len);
}

absl::Status RedisStateStore::Delete(const StoredSessionKey& key) {
  return Run({"DEL", KeyOf(key)}).status();
}

absl::StatusOr<std::vector<std::string>> RedisStateStore::LoadAll() {
  std::vector<std::string> files;
  std::string cursor = "0";
  const std::string pattern = absl::StrCat(address_.prefix, ":session:*");
  do {
    absl::StatusOr<Reply> page = Run({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!page.ok()) return page.status();
    const redisReply* r = page->get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      return absl::UnavailableError("redis: unexpected SCAN reply");
    }
    cursor.assign(r->element[0]->str, r->element[0]->len);
    for (size_t i = 0; i < r->element[1]->elements; ++i) {
      const redisReply* name = r->element[1]->element[i];
      absl::StatusOr<Reply> value = Run({"GET", std::string(name->str, name->len)});
      if (!value.ok()) return value.status();
      // Expired between SCAN and GET: gone, as it should be.
      if ((*value)->type == REDIS_REPLY_STRING) files.emplace_back((*value)->str, (*value)->len);
    }
  } while (cursor != "0");
  return files;
}

}  // namespace linserve
