#include "server/store/redis_state_store.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include <hiredis/hiredis.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/base/sha256.h"

namespace linserve {
namespace {

// KEYS: state, version, lease. ARGV: state file, expected version (-1: any),
// lease owner ("": none), ttl in ms (0: none). Replies the new version, or
// a FENCED error when the version or the lease is not what the writer holds.
constexpr char kFencedPut[] = R"lua(
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
local expected = tonumber(ARGV[2])
if expected >= 0 and current ~= expected then
  return redis.error_reply('FENCED the stored session is at version ' .. current ..
                           ' but this server last saw version ' .. expected)
end
if ARGV[3] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return redis.error_reply('FENCED this server no longer holds the session lease')
end
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
  redis.call('SET', KEYS[2], current + 1, 'PX', ttl)
else
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], current + 1)
end
return current + 1
)lua";

// KEYS: lease. ARGV: owner, ttl in ms. 1: taken (or extended), 0: held by
// another owner.
constexpr char kAcquireLease[] = R"lua(
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
)lua";

// KEYS: lease. ARGV: owner, ttl in ms. 1: extended, 0: not held by owner.
constexpr char kRenewLease[] = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
)lua";

// KEYS: lease. ARGV: owner. Deletes the lease only if owner holds it.
constexpr char kReleaseLease[] = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
)lua";

// KEYS: named-state index, named state. ARGV: name, index entry
// ("<digest> <bytes>"), state file. 1: stored; 0: the name is taken
// (nothing written). No TTL: named states never expire. The SET comes first,
// so that Redis out of memory refuses it before anything is written.
constexpr char kPutNamedState[] = R"lua(
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return 0
end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
)lua";

// KEYS: named-state index, named state. ARGV: name. 1: deleted; 0: there
// was none. (Redis drops a hash whose last field goes.)
constexpr char kDeleteNamedState[] = R"lua(
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('DEL', KEYS[2])
return 1
)lua";

absl::Status NamedStateNotFound(const NamedStateKey& key) {
  // The name is one the server checked ([A-Za-z0-9._-]), safe to echo.
  return absl::NotFoundError(absl::StrCat("no named state \"", key.name, "\""));
}

// An index entry "<digest> <bytes>" read back as `name`'s listing.
absl::StatusOr<NamedStateListing> ParseNamedIndexEntry(std::string name,
                                                       absl::string_view entry) {
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(entry, absl::MaxSplits(' ', 1));
  NamedStateListing listing;
  listing.digest = std::string(parts.first);
  if (!CheckNamedStateDigest(listing.digest).ok() ||
      !absl::SimpleAtoi(parts.second, &listing.bytes)) {
    return absl::UnavailableError(
        absl::StrCat("redis: the index entry of named state \"", name, "\" is malformed"));
  }
  listing.name = std::move(name);
  return listing;
}

std::string Millis(absl::Duration d) {
  return absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

}  // namespace

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
    if (absl::StrContains(error, "FENCED ")) {
      return absl::AbortedError(std::string(absl::StripPrefix(
          error.substr(error.find("FENCED ")), "FENCED ")));
    }
    return absl::UnavailableError(absl::StrCat("redis: ", error));
  }
  return reply;
}

std::string RedisStateStore::KeyOf(const StoredSessionKey& key) const {
  return absl::StrCat(address_.prefix, ":session:", StoredSessionName(key));
}

std::string RedisStateStore::VersionKeyOf(const StoredSessionKey& key) const {
  return absl::StrCat(address_.prefix, ":version:", StoredSessionName(key));
}

std::string RedisStateStore::LeaseKeyOf(const StoredSessionKey& key) const {
  return absl::StrCat(address_.prefix, ":lease:", StoredSessionName(key));
}

std::string RedisStateStore::NamedIndexKeyOf(const std::string& tenant) const {
  return absl::StrCat(address_.prefix, ":named:", Sha256Hex({std::string_view(tenant)}));
}

std::string RedisStateStore::NamedKeyOf(const NamedStateKey& key) const {
  return absl::StrCat(address_.prefix, ":named-state:",
                      StoredSessionName({key.tenant, key.name}));
}

absl::StatusOr<long long> RedisStateStore::RunScript(const char* script,
                                                     const std::vector<std::string>& keys,
                                                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"EVAL", script, absl::StrCat(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<Reply> reply = Run(argv);
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_INTEGER) {
    return absl::UnavailableError("redis: a script replied something other than an integer");
  }
  return (*reply)->integer;
}

absl::Status RedisStateStore::Put(const StoredSessionKey& key, const std::string& state_file) {
  return PutFenced(key, state_file, WriteFence{/*expected_version=*/-1, ""}).status();
}

absl::StatusOr<int64_t> RedisStateStore::PutFenced(const StoredSessionKey& key,
                                                   const std::string& state_file,
                                                   const WriteFence& fence) {
  const int64_t ttl_ms = ttl_ > absl::ZeroDuration() ? absl::ToInt64Milliseconds(ttl_) : 0;
  absl::StatusOr<long long> version =
      RunScript(kFencedPut, {KeyOf(key), VersionKeyOf(key), LeaseKeyOf(key)},
                {state_file, absl::StrCat(fence.expected_version), fence.lease_owner,
                 absl::StrCat(ttl_ms)});
  if (absl::IsAborted(version.status())) {
    return absl::AbortedError(absl::StrCat("session ", key.session_id,
                                           " was not saved: ", version.status().message()));
  }
  if (!version.ok()) return version.status();
  return static_cast<int64_t>(*version);
}

absl::StatusOr<std::string> RedisStateStore::Get(const StoredSessionKey& key) {
  absl::StatusOr<VersionedStateFile> stored = GetVersioned(key);
  if (!stored.ok()) return stored.status();
  return std::move(stored->file);
}

absl::StatusOr<VersionedStateFile> RedisStateStore::GetVersioned(const StoredSessionKey& key) {
  // One MGET: the state and its version as of the same moment.
  absl::StatusOr<Reply> reply = Run({"MGET", KeyOf(key), VersionKeyOf(key)});
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
    return absl::UnavailableError("redis: unexpected MGET reply");
  }
  if (r->element[0]->type != REDIS_REPLY_STRING) {
    return absl::NotFoundError(absl::StrCat("no stored state for session ", key.session_id));
  }
  VersionedStateFile stored;
  stored.file.assign(r->element[0]->str, r->element[0]->len);
  if (r->element[1]->type == REDIS_REPLY_STRING &&
      !absl::SimpleAtoi(absl::string_view(r->element[1]->str, r->element[1]->len),
                        &stored.version)) {
    return absl::UnavailableError(absl::StrCat("redis: the version of session ", key.session_id,
                                               " is not a number"));
  }
  return stored;
}

absl::StatusOr<int64_t> RedisStateStore::VersionOf(const StoredSessionKey& key) {
  absl::StatusOr<Reply> reply = Run({"GET", VersionKeyOf(key)});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_STRING) return 0;
  int64_t version = 0;
  if (!absl::SimpleAtoi(absl::string_view((*reply)->str, (*reply)->len), &version)) {
    return absl::UnavailableError(absl::StrCat("redis: the version of session ", key.session_id,
                                               " is not a number"));
  }
  return version;
}

absl::Status RedisStateStore::Delete(const StoredSessionKey& key) {
  return Run({"DEL", KeyOf(key), VersionKeyOf(key), LeaseKeyOf(key)}).status();
}

absl::Status RedisStateStore::AcquireLease(const StoredSessionKey& key, const std::string& owner,
                                           absl::Duration ttl) {
  absl::StatusOr<long long> taken = RunScript(kAcquireLease, {LeaseKeyOf(key)}, {owner, Millis(ttl)});
  if (!taken.ok()) return taken.status();
  if (*taken == 0) {
    return absl::AbortedError(absl::StrCat("session_id ", key.session_id,
                                           " is running a turn on another server; retry once "
                                           "that turn has finished"));
  }
  return absl::OkStatus();
}

absl::Status RedisStateStore::RenewLease(const StoredSessionKey& key, const std::string& owner,
                                         absl::Duration ttl) {
  absl::StatusOr<long long> renewed = RunScript(kRenewLease, {LeaseKeyOf(key)}, {owner, Millis(ttl)});
  if (!renewed.ok()) return renewed.status();
  if (*renewed == 0) {
    return absl::AbortedError(absl::StrCat("the lease on session_id ", key.session_id,
                                           " expired before the turn finished"));
  }
  return absl::OkStatus();
}

absl::Status RedisStateStore::ReleaseLease(const StoredSessionKey& key, const std::string& owner) {
  return RunScript(kReleaseLease, {LeaseKeyOf(key)}, {owner}).status();
}

absl::StatusOr<std::vector<std::string>> RedisStateStore::LoadAll() {
  std::vector<std::string> files;
  std::string cursor = "0";
  // Sessions only: named states' keys (<prefix>:named:..., <prefix>:named-state:...)
  // differ right after the prefix.
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

absl::Status RedisStateStore::PutNamedState(const NamedStateKey& key, const std::string& digest,
                                            const std::string& state_file) {
  // The digest is half of the index entry, which a space splits.
  if (absl::Status valid = CheckNamedStateDigest(digest); !valid.ok()) return valid;
  absl::StatusOr<long long> stored =
      RunScript(kPutNamedState, {NamedIndexKeyOf(key.tenant), NamedKeyOf(key)},
                {key.name, absl::StrCat(digest, " ", state_file.size()), state_file});
  if (!stored.ok()) return stored.status();
  if (*stored == 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "named state \"", key.name,
        "\" already exists; a name is never replaced: delete it first or choose another name"));
  }
  return absl::OkStatus();
}

absl::StatusOr<NamedStateListing> RedisStateStore::FindNamedState(const NamedStateKey& key) {
  absl::StatusOr<Reply> reply = Run({"HGET", NamedIndexKeyOf(key.tenant), key.name});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_STRING) return NamedStateNotFound(key);
  return ParseNamedIndexEntry(key.name, absl::string_view((*reply)->str, (*reply)->len));
}

absl::StatusOr<std::string> RedisStateStore::GetNamedState(const NamedStateKey& key) {
  absl::StatusOr<Reply> reply = Run({"GET", NamedKeyOf(key)});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_STRING) return NamedStateNotFound(key);
  return std::string((*reply)->str, (*reply)->len);
}

absl::Status RedisStateStore::DeleteNamedState(const NamedStateKey& key) {
  absl::StatusOr<long long> deleted =
      RunScript(kDeleteNamedState, {NamedIndexKeyOf(key.tenant), NamedKeyOf(key)}, {key.name});
  if (!deleted.ok()) return deleted.status();
  if (*deleted == 0) return NamedStateNotFound(key);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NamedStateListing>> RedisStateStore::ListNamedStates(
    const std::string& tenant) {
  absl::StatusOr<Reply> reply = Run({"HGETALL", NamedIndexKeyOf(tenant)});
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0) {
    return absl::UnavailableError("redis: unexpected HGETALL reply");
  }
  std::vector<NamedStateListing> listings;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const redisReply* name = r->element[i];
    const redisReply* entry = r->element[i + 1];
    if (name->type != REDIS_REPLY_STRING || entry->type != REDIS_REPLY_STRING) {
      return absl::UnavailableError("redis: unexpected HGETALL reply");
    }
    absl::StatusOr<NamedStateListing> listing = ParseNamedIndexEntry(
        std::string(name->str, name->len), absl::string_view(entry->str, entry->len));
    if (!listing.ok()) return listing.status();
    listings.push_back(*std::move(listing));
  }
  std::sort(listings.begin(), listings.end(),
            [](const NamedStateListing& a, const NamedStateListing& b) { return a.name < b.name; });
  return listings;
}

}  // namespace linserve
