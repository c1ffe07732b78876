#include "engine/formats/torch_unpickler.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

// Pickle opcodes (Python's Lib/pickletools.py), protocols 0 to 2, grouped
// by what they build.
// clang-format off
enum Op : uint8_t {
  kProto = 0x80, kStop = '.', kMark = '(', kPop = '0', kPopMark = '1', kDup = '2',
  kNone = 'N', kNewTrue = 0x88, kNewFalse = 0x89, kBinInt = 'J', kBinInt1 = 'K',
  kBinInt2 = 'M', kLong1 = 0x8a, kBinFloat = 'G', kBinUnicode = 'X',
  kEmptyTuple = ')', kTuple = 't', kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87,
  kEmptyList = ']', kList = 'l', kAppend = 'a', kAppends = 'e',
  kEmptyDict = '}', kDict = 'd', kSetItem = 's', kSetItems = 'u',
  kBinPut = 'q', kLongBinPut = 'r', kBinGet = 'h', kLongBinGet = 'j',
  kGlobal = 'c', kReduce = 'R', kNewObj = 0x81, kBuild = 'b', kBinPersId = 'Q',
};
// clang-format on

constexpr int kHighestProtocol = 2;
constexpr size_t kMaxShown = 200;
constexpr char kOrderedDict[] = "collections.OrderedDict";
constexpr char kRebuildTensor[] = "torch._utils._rebuild_tensor_v2";
constexpr char kRebuildParameter[] = "torch._utils._rebuild_parameter";

enum class Kind {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kObject,
  kStorage,
  kTensor
};

struct Value;
using Ref = std::shared_ptr<Value>;

// One Python object. Containers hold references, as Python's do, so that a
// memoized dict filled later is the same dict everywhere.
struct Value {
  explicit Value(Kind k) : kind(k) {}

  Kind kind;
  int depth = 1;           // Nesting, this value included.
  bool sealed = false;     // Inside a container: no longer mutable, which rules out cycles.
  bool ordered = false;    // A dict made by collections.OrderedDict().
  int64_t number = 0;      // kBool, kInt.
  std::string text;        // kString; kGlobal and kObject: "module.name" of the class.
  std::vector<Ref> items;  // kTuple, kList; kDict: key, value, key, value, ...
  std::unique_ptr<PickledTensor> tensor;  // kStorage (its storage_* fields), kTensor.
};

std::string Shown(std::string_view text) {
  // Debian's Abseil has a string_view of its own, not std's.
  const absl::string_view view(text.data(), std::min(text.size(), kMaxShown));
  return absl::StrCat(absl::CHexEscape(view), text.size() > kMaxShown ? "..." : "");
}

std::string Describe(const Value& v) {
  switch (v.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "a bool";
    case Kind::kInt:
      return "an int";
    case Kind::kFloat:
      return "a float";
    case Kind::kString:
      return "a string";
    case Kind::kTuple:
      return "a tuple";
    case Kind::kList:
      return "a list";
    case Kind::kDict:
      return "a dict";
    case Kind::kGlobal:
      return absl::StrCat("the class or function ", Shown(v.text));
    case Kind::kObject:
      return absl::StrCat("a ", Shown(v.text), " object");
    case Kind::kStorage:
      return "a bare storage";
    case Kind::kTensor:
      return "a tensor";
  }
  return "a value";
}

class Unpickler {
 public:
  Unpickler(std::string_view in, uint64_t file_offset) : in_(in), file_offset_(file_offset) {}

  // The dict the pickle builds, as the caller receives it.
  absl::StatusOr<PickledStateDict> Run();

 private:
  template <typename... Args>
  absl::Status Corrupt(const Args&... args) const {
    return absl::DataLossError(absl::StrCat("data.pkl byte ", op_at_, " (file byte ",
                                            file_offset_ + op_at_, "): ", args...));
  }
  absl::StatusOr<Ref> RunOps();
  absl::Status Step(uint8_t op);
  absl::StatusOr<PickledStateDict> StateDict(const Value& top);

  // Counts `bytes` about to be copied out of the pickle against its budget.
  absl::Status Charge(uint64_t bytes);
  absl::Status ChargeTensor(const PickledTensor& t);

  absl::StatusOr<std::string_view> Take(size_t n);
  absl::StatusOr<std::string_view> Line();
  absl::StatusOr<uint64_t> TakeLe(size_t n);

  absl::StatusOr<Ref> Make(Kind kind);
  absl::StatusOr<Ref> MakeInt(int64_t n);
  absl::StatusOr<Ref> MakeContainer(Kind kind, std::vector<Ref> items);
  absl::Status AddChild(Value& parent, Ref child);

  // The stack above the innermost mark, as Python's unpickler sees it.
  size_t Floor() const { return marks_.empty() ? 0 : marks_.back(); }
  absl::StatusOr<Ref> Pop();
  absl::StatusOr<Ref> Top();
  absl::StatusOr<std::vector<Ref>> PopMark();
  absl::Status AddToTop(Kind kind, std::vector<Ref> items);

  absl::StatusOr<Ref> Call(const Ref& callable, const Ref& args);
  absl::StatusOr<Ref> RebuildTensor(const Value& args);
  absl::StatusOr<Ref> PersistentLoad(const Value& id);

  const std::string_view in_;
  const uint64_t file_offset_;
  size_t at_ = 0;     // Next byte to read.
  size_t op_at_ = 0;  // The opcode being run, for messages.
  int64_t objects_ = 0;
  uint64_t copied_bytes_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  absl::flat_hash_map<uint32_t, Ref> memo_;
  Ref result_;
};

absl::StatusOr<std::string_view> Unpickler::Take(size_t n) {
  if (in_.size() - at_ < n) {
    return Corrupt("truncated: the opcode needs ", n, " more bytes but the pickle ends at byte ",
                   in_.size());
  }
  const std::string_view bytes = in_.substr(at_, n);
  at_ += n;
  return bytes;
}

absl::StatusOr<std::string_view> Unpickler::Line() {
  const size_t end = in_.find('\n', at_);
  if (end == std::string_view::npos) return Corrupt("truncated: a GLOBAL name has no end of line");
  const std::string_view line = in_.substr(at_, end - at_);
  at_ = end + 1;
  return line;
}

absl::StatusOr<uint64_t> Unpickler::TakeLe(size_t n) {
  LINSERVE_ASSIGN_OR_RETURN(const std::string_view bytes, Take(n));
  uint64_t value = 0;
  for (size_t i = n; i-- > 0;) value = value << 8 | static_cast<uint8_t>(bytes[i]);
  return value;
}

absl::Status Unpickler::Charge(uint64_t bytes) {
  const uint64_t limit = kPickleCopiedBytesPerByte * in_.size() + kPickleCopiedBytesAllowance;
  copied_bytes_ += bytes;  // Each charge is at most a few times the pickle's size: no overflow.
  if (copied_bytes_ > limit) {
    return Corrupt("the values copied out of the pickle pass ", limit, " bytes, its limit (",
                   kPickleCopiedBytesPerByte, " per byte of its ", in_.size(), ", plus ",
                   kPickleCopiedBytesAllowance, "): it uses a long value over and over");
  }
  return absl::OkStatus();
}

absl::Status Unpickler::ChargeTensor(const PickledTensor& t) {
  return Charge(sizeof(t) + t.storage_key.size() + t.storage_type.size() +
                (t.sizes.size() + t.strides.size()) * sizeof(int64_t));
}

absl::StatusOr<Ref> Unpickler::Make(Kind kind) {
  if (++objects_ > kMaxPickleObjects) {
    return Corrupt("the pickle builds more than ", kMaxPickleObjects,
                   " values, far more than any dict of tensors");
  }
  return std::make_shared<Value>(kind);
}

absl::StatusOr<Ref> Unpickler::MakeInt(int64_t n) {
  LINSERVE_ASSIGN_OR_RETURN(Ref v, Make(Kind::kInt));
  v->number = n;
  return v;
}

absl::Status Unpickler::AddChild(Value& parent, Ref child) {
  if (parent.sealed) return Corrupt("modifies ", Describe(parent), " already inside another value");
  if (child.get() == &parent) return Corrupt("puts ", Describe(parent), " inside itself");
  if (child->depth >= kMaxPickleDepth) {
    return Corrupt("nests values more than ", kMaxPickleDepth, " deep");
  }
  child->sealed = true;
  parent.depth = std::max(parent.depth, child->depth + 1);
  parent.items.push_back(std::move(child));
  return absl::OkStatus();
}

absl::StatusOr<Ref> Unpickler::MakeContainer(Kind kind, std::vector<Ref> items) {
  if (kind == Kind::kDict && items.size() % 2 != 0) {
    return Corrupt("builds a dict from an odd number (", items.size(), ") of keys and values");
  }
  LINSERVE_ASSIGN_OR_RETURN(Ref v, Make(kind));
  v->items.reserve(items.size());
  for (Ref& item : items) LINSERVE_RETURN_IF_ERROR(AddChild(*v, std::move(item)));
  return v;
}

absl::StatusOr<Ref> Unpickler::Pop() {
  if (stack_.size() <= Floor()) return Corrupt("pops an empty stack");
  Ref v = std::move(stack_.back());
  stack_.pop_back();
  return v;
}

absl::StatusOr<Ref> Unpickler::Top() {
  if (stack_.size() <= Floor()) return Corrupt("reads the top of an empty stack");
  return stack_.back();
}

absl::StatusOr<std::vector<Ref>> Unpickler::PopMark() {
  if (marks_.empty()) return Corrupt("needs a MARK and there is none");
  const size_t mark = marks_.back();
  marks_.pop_back();
  std::vector<Ref> items(std::make_move_iterator(stack_.begin() + mark),
                         std::make_move_iterator(stack_.end()));
  stack_.resize(mark);
  return items;
}

// APPEND(S) and SETITEM(S): the items go into the container on top.
absl::Status Unpickler::AddToTop(Kind kind, std::vector<Ref> items) {
  LINSERVE_ASSIGN_OR_RETURN(const Ref target, Top());
  if (target->kind != kind) {
    return Corrupt(kind == Kind::kDict ? "sets items of " : "appends to ", Describe(*target));
  }
  if (kind == Kind::kDict && items.size() % 2 != 0) {
    return Corrupt("sets dict items from an odd number (", items.size(), ") of keys and values");
  }
  for (Ref& item : items) LINSERVE_RETURN_IF_ERROR(AddChild(*target, std::move(item)));
  return absl::OkStatus();
}

absl::StatusOr<Ref> Unpickler::PersistentLoad(const Value& id) {
  // ('storage', torch.<T>Storage, key, location, numel), as torch.save's persistent_id.
  const std::vector<Ref>& f = id.items;
  if (id.kind != Kind::kTuple || f.size() != 5 || f[0]->kind != Kind::kString ||
      f[0]->text != "storage") {
    return Corrupt("a persistent id is ", Describe(id),
                   ", not ('storage', type, key, location, numel)");
  }
  if (f[1]->kind != Kind::kGlobal || f[1]->text.rfind("torch.", 0) != 0 || f[1]->text.size() < 13 ||
      f[1]->text.compare(f[1]->text.size() - 7, 7, "Storage") != 0) {
    return Corrupt("a persistent id names ", Describe(*f[1]), ", not a torch storage type");
  }
  if (f[2]->kind != Kind::kString || f[3]->kind != Kind::kString || f[4]->kind != Kind::kInt ||
      f[4]->number < 0) {
    return Corrupt("a persistent id's key, location or size is malformed");
  }
  const std::string_view type = std::string_view(f[1]->text).substr(6);  // After "torch.".
  LINSERVE_RETURN_IF_ERROR(Charge(sizeof(PickledTensor) + type.size() + f[2]->text.size()));
  LINSERVE_ASSIGN_OR_RETURN(Ref storage, Make(Kind::kStorage));
  storage->tensor = std::make_unique<PickledTensor>();
  storage->tensor->storage_type = type;
  storage->tensor->storage_key = f[2]->text;
  storage->tensor->storage_numel = f[4]->number;
  return storage;
}

absl::StatusOr<Ref> Unpickler::RebuildTensor(const Value& args) {
  // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  const std::vector<Ref>& a = args.items;
  if (a.size() != 6 && a.size() != 7) {
    return Corrupt(kRebuildTensor, " gets ", a.size(), " arguments, not 6 or 7");
  }
  if (a[0]->kind != Kind::kStorage)
    return Corrupt(kRebuildTensor, " gets ", Describe(*a[0]), " for its storage");
  if (a[1]->kind != Kind::kInt || a[1]->number < 0) {
    return Corrupt(kRebuildTensor, " gets ", Describe(*a[1]), " for its storage offset");
  }
  for (int i : {2, 3}) {
    const Value& list = *a[i];
    if (list.kind != Kind::kTuple || list.items.size() > kMaxPickledRank) {
      return Corrupt(kRebuildTensor, " gets ", Describe(list), " of ", list.items.size(),
                     " items for its ", i == 2 ? "size" : "stride", ", not a tuple of up to ",
                     kMaxPickledRank);
    }
  }
  // A memoized storage or argument tuple can be rebuilt any number of times.
  LINSERVE_RETURN_IF_ERROR(ChargeTensor(*a[0]->tensor));
  LINSERVE_RETURN_IF_ERROR(Charge((a[2]->items.size() + a[3]->items.size()) * sizeof(int64_t)));
  LINSERVE_ASSIGN_OR_RETURN(Ref tensor, Make(Kind::kTensor));
  tensor->tensor = std::make_unique<PickledTensor>(*a[0]->tensor);
  PickledTensor& t = *tensor->tensor;
  t.storage_offset = a[1]->number;
  for (int i : {2, 3}) {
    const char* what = i == 2 ? "size" : "stride";
    std::vector<int64_t>& out = i == 2 ? t.sizes : t.strides;
    for (const Ref& n : a[i]->items) {
      if (n->kind != Kind::kInt || n->number < 0) {
        return Corrupt(kRebuildTensor, " gets ", Describe(*n), " in its ", what,
                       n->kind == Kind::kInt ? " (negative)" : ", not an int");
      }
      out.push_back(n->number);
    }
  }
  if (t.sizes.size() != t.strides.size()) {
    return Corrupt(kRebuildTensor, " gets ", t.sizes.size(), " sizes but ", t.strides.size(),
                   " strides");
  }
  if (a[4]->kind != Kind::kBool) {
    return Corrupt(kRebuildTensor, " gets ", Describe(*a[4]), " for requires_grad");
  }
  return tensor;  // Hooks and metadata do not change the values.
}

// Calls only what a state dict needs; anything else becomes an opaque object
// named by its class, so that the caller can say what the file holds.
absl::StatusOr<Ref> Unpickler::Call(const Ref& callable, const Ref& args) {
  if (callable->kind != Kind::kGlobal) return Corrupt("calls ", Describe(*callable));
  if (args->kind != Kind::kTuple) {
    return Corrupt("calls ", Shown(callable->text), " with ", Describe(*args), ", not a tuple");
  }
  if (callable->text == kOrderedDict) {
    if (!args->items.empty()) return Corrupt(kOrderedDict, " gets arguments");
    LINSERVE_ASSIGN_OR_RETURN(Ref dict, Make(Kind::kDict));
    dict->ordered = true;
    return dict;
  }
  if (callable->text == kRebuildTensor) return RebuildTensor(*args);
  if (callable->text == kRebuildParameter) {
    // (data, requires_grad, backward_hooks): a Parameter's values are its data's.
    if (args->items.size() != 3 || args->items[0]->kind != Kind::kTensor) {
      return Corrupt(kRebuildParameter, " gets arguments other than (tensor, bool, hooks)");
    }
    return args->items[0];
  }
  // A memoized class can be called any number of times, a few bytes each.
  LINSERVE_RETURN_IF_ERROR(Charge(callable->text.size()));
  LINSERVE_ASSIGN_OR_RETURN(Ref object, Make(Kind::kObject));
  object->text = callable->text;
  return object;
}

absl::Status Unpickler::Step(uint8_t op) {
  switch (op) {
    case kProto: {
      LINSERVE_ASSIGN_OR_RETURN(const uint64_t version, TakeLe(1));
      if (version > kHighestProtocol) {
        return absl::InvalidArgumentError(absl::StrCat(
            "data.pkl byte ", op_at_, ": pickle protocol ", version,
            "; torch.save writes protocol 2 unless told otherwise, and only that is read"));
      }
      return absl::OkStatus();
    }
    case kStop: {
      LINSERVE_ASSIGN_OR_RETURN(result_, Pop());
      if (!stack_.empty() || !marks_.empty()) return Corrupt("STOP leaves values on the stack");
      return absl::OkStatus();
    }
    case kMark:
      marks_.push_back(stack_.size());
      return absl::OkStatus();
    case kPop:
      return Pop().status();
    case kPopMark:
      return PopMark().status();
    case kDup: {
      LINSERVE_ASSIGN_OR_RETURN(Ref top, Top());
      stack_.push_back(std::move(top));
      return absl::OkStatus();
    }
    case kNone:
    case kNewTrue:
    case kNewFalse: {
      LINSERVE_ASSIGN_OR_RETURN(Ref v, Make(op == kNone ? Kind::kNone : Kind::kBool));
      v->number = op == kNewTrue;
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kBinInt:
    case kBinInt1:
    case kBinInt2: {
      const size_t n = op == kBinInt ? 4 : op == kBinInt1 ? 1 : 2;
      LINSERVE_ASSIGN_OR_RETURN(const uint64_t raw, TakeLe(n));
      const int64_t value = op == kBinInt ? static_cast<int32_t>(raw) : static_cast<int64_t>(raw);
      LINSERVE_ASSIGN_OR_RETURN(Ref v, MakeInt(value));
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kLong1: {
      LINSERVE_ASSIGN_OR_RETURN(const uint64_t n, TakeLe(1));
      if (n > 8) return Corrupt("an integer of ", n, " bytes does not fit 64 bits");
      LINSERVE_ASSIGN_OR_RETURN(uint64_t raw, TakeLe(n));
      // Two's complement in n bytes: sign-extend from the top byte.
      if (n > 0 && n < 8 && (raw >> (8 * n - 1)) & 1) raw |= ~uint64_t{0} << (8 * n);
      LINSERVE_ASSIGN_OR_RETURN(Ref v, MakeInt(static_cast<int64_t>(raw)));
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kBinFloat: {
      LINSERVE_RETURN_IF_ERROR(Take(8).status());  // The value matters to no tensor.
      LINSERVE_ASSIGN_OR_RETURN(Ref v, Make(Kind::kFloat));
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kBinUnicode: {
      LINSERVE_ASSIGN_OR_RETURN(const uint64_t n, TakeLe(4));
      LINSERVE_ASSIGN_OR_RETURN(const std::string_view text, Take(n));
      LINSERVE_RETURN_IF_ERROR(Charge(n));
      LINSERVE_ASSIGN_OR_RETURN(Ref v, Make(Kind::kString));
      v->text = std::string(text);
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kEmptyTuple:
    case kEmptyList:
    case kEmptyDict: {
      const Kind kind = op == kEmptyTuple  ? Kind::kTuple
                        : op == kEmptyList ? Kind::kList
                                           : Kind::kDict;
      LINSERVE_ASSIGN_OR_RETURN(Ref v, Make(kind));
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kTuple1:
    case kTuple2:
    case kTuple3: {
      std::vector<Ref> items(op - kTuple1 + 1);
      for (size_t i = items.size(); i-- > 0;) {
        LINSERVE_ASSIGN_OR_RETURN(items[i], Pop());
      }
      LINSERVE_ASSIGN_OR_RETURN(Ref v, MakeContainer(Kind::kTuple, std::move(items)));
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kTuple:
    case kList:
    case kDict: {
      const Kind kind = op == kTuple ? Kind::kTuple : op == kList ? Kind::kList : Kind::kDict;
      LINSERVE_ASSIGN_OR_RETURN(std::vector<Ref> items, PopMark());
      LINSERVE_ASSIGN_OR_RETURN(Ref v, MakeContainer(kind, std::move(items)));
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kAppend:
    case kSetItem: {
      const size_t n = op == kAppend ? 1 : 2;
      std::vector<Ref> items(n);
      for (size_t i = n; i-- > 0;) {
        LINSERVE_ASSIGN_OR_RETURN(items[i], Pop());
      }
      return AddToTop(op == kAppend ? Kind::kList : Kind::kDict, std::move(items));
    }
    case kAppends:
    case kSetItems: {
      LINSERVE_ASSIGN_OR_RETURN(std::vector<Ref> items, PopMark());
      return AddToTop(op == kAppends ? Kind::kList : Kind::kDict, std::move(items));
    }
    case kBinPut:
    case kLongBinPut: {
      LINSERVE_ASSIGN_OR_RETURN(const uint64_t index, TakeLe(op == kBinPut ? 1 : 4));
      LINSERVE_ASSIGN_OR_RETURN(memo_[static_cast<uint32_t>(index)], Top());
      return absl::OkStatus();
    }
    case kBinGet:
    case kLongBinGet: {
      LINSERVE_ASSIGN_OR_RETURN(const uint64_t index, TakeLe(op == kBinGet ? 1 : 4));
      const auto it = memo_.find(static_cast<uint32_t>(index));
      if (it == memo_.end()) return Corrupt("gets memo entry ", index, ", which was never put");
      stack_.push_back(it->second);
      return absl::OkStatus();
    }
    case kGlobal: {
      LINSERVE_ASSIGN_OR_RETURN(const std::string_view module, Line());
      LINSERVE_ASSIGN_OR_RETURN(const std::string_view name, Line());
      LINSERVE_RETURN_IF_ERROR(Charge(module.size() + 1 + name.size()));
      LINSERVE_ASSIGN_OR_RETURN(Ref v, Make(Kind::kGlobal));
      v->text = std::string(module) + "." + std::string(name);
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kReduce:
    case kNewObj: {
      LINSERVE_ASSIGN_OR_RETURN(const Ref args, Pop());
      LINSERVE_ASSIGN_OR_RETURN(const Ref callable, Pop());
      LINSERVE_ASSIGN_OR_RETURN(Ref v, Call(callable, args));
      stack_.push_back(std::move(v));
      return absl::OkStatus();
    }
    case kBuild: {
      // Sets attributes (an OrderedDict's _metadata, an object's fields): ignored.
      LINSERVE_ASSIGN_OR_RETURN(const Ref state, Pop());
      LINSERVE_ASSIGN_OR_RETURN(const Ref target, Top());
      const bool has_attributes =
          target->kind == Kind::kObject || (target->kind == Kind::kDict && target->ordered);
      if (!has_attributes) return Corrupt("BUILD sets attributes of ", Describe(*target));
      return absl::OkStatus();
    }
    case kBinPersId: {
      LINSERVE_ASSIGN_OR_RETURN(const Ref id, Pop());
      LINSERVE_ASSIGN_OR_RETURN(Ref storage, PersistentLoad(*id));
      stack_.push_back(std::move(storage));
      return absl::OkStatus();
    }
  }
  return Corrupt("opcode 0x", absl::Hex(op, absl::kZeroPad2),
                 " is not one torch.save writes for a dict of tensors");
}

absl::StatusOr<Ref> Unpickler::RunOps() {
  for (int64_t ops = 0; result_ == nullptr; ++ops) {
    op_at_ = at_;
    if (at_ == in_.size()) return Corrupt("truncated: the pickle ends without STOP");
    if (ops == kMaxPickleOps) {
      return Corrupt("the pickle runs past ", kMaxPickleOps,
                     " opcodes, far more than any dict of tensors");
    }
    LINSERVE_RETURN_IF_ERROR(Step(static_cast<uint8_t>(in_[at_++])));
  }
  if (at_ != in_.size()) {
    op_at_ = at_;
    return Corrupt(in_.size() - at_, " bytes follow STOP");
  }
  return std::move(result_);
}

absl::StatusOr<PickledStateDict> Unpickler::Run() {
  LINSERVE_ASSIGN_OR_RETURN(const Ref top, RunOps());
  return StateDict(*top);
}

absl::StatusOr<PickledStateDict> Unpickler::StateDict(const Value& top) {
  if (top.kind != Kind::kDict) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint holds ", Describe(top), ", not a dict of tensors"));
  }
  PickledStateDict tensors;
  tensors.reserve(top.items.size() / 2);
  absl::flat_hash_set<std::string_view> names;
  for (size_t i = 0; i < top.items.size(); i += 2) {
    const Value& key = *top.items[i];
    const Value& value = *top.items[i + 1];
    if (key.kind != Kind::kString) {
      return absl::InvalidArgumentError(absl::StrCat("the checkpoint's dict has a key that is ",
                                                     Describe(key), ", not a string"));
    }
    if (value.kind != Kind::kTensor) {
      return absl::InvalidArgumentError(absl::StrCat("the checkpoint's key '", Shown(key.text),
                                                     "' holds ", Describe(value),
                                                     ", not a tensor"));
    }
    if (!names.insert(key.text).second) {
      return absl::DataLossError(
          absl::StrCat("the checkpoint's dict holds key '", Shown(key.text), "' twice"));
    }
    // One tensor may sit under many names (tied weights), each a copy.
    LINSERVE_RETURN_IF_ERROR(ChargeTensor(*value.tensor));
    LINSERVE_RETURN_IF_ERROR(Charge(key.text.size()));
    tensors.emplace_back(key.text, *value.tensor);
  }
  return tensors;
}

}  // namespace

absl::StatusOr<PickledStateDict> UnpickleStateDict(std::string_view pickle, uint64_t file_offset) {
  return Unpickler(pickle, file_offset).Run();
}

}  // namespace linserve
