#include "engine/formats/zip_directory.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr uint64_t kEndBytes = 22;
constexpr uint64_t kZip64EndBytes = 56;
constexpr uint64_t kZip64LocatorBytes = 20;
constexpr uint64_t kCentralBytes = 46;
constexpr uint64_t kLocalBytes = 30;
constexpr uint64_t kMaxCommentBytes = 0xffff;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kEncryptedFlag = 1;
constexpr uint16_t kStoredMethod = 0;
// Checkpoints hold one entry per storage plus a few: a thousand or so for
// the largest models. Past this the directory is corrupt, and the cap keeps
// a hostile one from costing more memory than a real one.
constexpr uint64_t kMaxCentralDirectoryBytes = uint64_t{64} << 20;
constexpr size_t kMaxShownName = 200;

uint16_t Le16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | static_cast<uint8_t>(p[1]) << 8);
}
uint32_t Le32(const char* p) { return Le16(p) | static_cast<uint32_t>(Le16(p + 2)) << 16; }
uint64_t Le64(const char* p) { return Le32(p) | static_cast<uint64_t>(Le32(p + 4)) << 32; }

std::string Shown(std::string_view name) {
  // Debian's Abseil has a string_view of its own, not std's.
  const absl::string_view view(name.data(), std::min(name.size(), kMaxShownName));
  return absl::StrCat(absl::CHexEscape(view), name.size() > kMaxShownName ? "..." : "");
}

template <typename... Args>
absl::Status Corrupt(const Args&... args) {
  return absl::DataLossError(absl::StrCat(args...));
}

// Where the central directory lies, from the end records.
struct CentralDirectory {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t entries = 0;
  uint64_t end = 0;  // The first byte of the end records: everything else lies before it.
};

// The end-of-central-directory record sits at the very end, after a comment
// of up to 64 KiB; a scan from the back finds the one whose comment length
// reaches exactly to the end of the file.
absl::StatusOr<uint64_t> FindEndRecord(const ByteSource& source) {
  const uint64_t size = source.size();
  if (size < kEndBytes) {
    return Corrupt("truncated: the file ends at byte ", size, ", too short for the ", kEndBytes,
                   "-byte end-of-central-directory record a zip ends with");
  }
  const uint64_t tail_bytes = std::min(size, kEndBytes + kMaxCommentBytes);
  const uint64_t tail_start = size - tail_bytes;
  LINSERVE_ASSIGN_OR_RETURN(const std::string tail, source.ReadString(tail_start, tail_bytes));
  for (uint64_t at = tail_bytes - kEndBytes + 1; at-- > 0;) {
    const char* p = tail.data() + at;
    if (Le32(p) == kEndSignature && at + kEndBytes + Le16(p + 20) == tail_bytes) {
      return tail_start + at;
    }
  }
  return Corrupt(
      "truncated or not a zip: no end-of-central-directory record ends the file at byte ", size);
}

absl::StatusOr<CentralDirectory> ReadEndRecords(const ByteSource& source) {
  LINSERVE_ASSIGN_OR_RETURN(const uint64_t end_at, FindEndRecord(source));
  LINSERVE_ASSIGN_OR_RETURN(const std::string end, source.ReadString(end_at, kEndBytes));
  CentralDirectory cd;
  cd.end = end_at;
  const uint16_t disk = Le16(end.data() + 4);
  const uint16_t cd_disk = Le16(end.data() + 6);
  const uint16_t disk_entries = Le16(end.data() + 8);
  cd.entries = Le16(end.data() + 10);
  cd.size = Le32(end.data() + 12);
  cd.offset = Le32(end.data() + 16);

  // Zip64: a locator just before the record points at a 64-bit copy of it.
  bool zip64 = false;
  if (end_at >= kZip64LocatorBytes) {
    const uint64_t locator_at = end_at - kZip64LocatorBytes;
    LINSERVE_ASSIGN_OR_RETURN(const std::string locator,
                              source.ReadString(locator_at, kZip64LocatorBytes));
    if (Le32(locator.data()) == kZip64LocatorSignature) {
      zip64 = true;
      const uint64_t record_at = Le64(locator.data() + 8);
      if (record_at > locator_at || locator_at - record_at < kZip64EndBytes) {
        return Corrupt("the zip64 locator at byte ", locator_at, " points at byte ", record_at,
                       ", not at a zip64 end record before it");
      }
      LINSERVE_ASSIGN_OR_RETURN(const std::string record,
                                source.ReadString(record_at, kZip64EndBytes));
      if (Le32(record.data()) != kZip64EndSignature) {
        return Corrupt("no zip64 end record at byte ", record_at, ", where the locator at byte ",
                       locator_at, " points");
      }
      if (Le32(record.data() + 16) != 0 || Le32(record.data() + 20) != 0 ||
          Le64(record.data() + 24) != Le64(record.data() + 32)) {
        return Corrupt("the zip64 end record at byte ", record_at,
                       " describes an archive split over several disks");
      }
      cd.entries = Le64(record.data() + 32);
      cd.size = Le64(record.data() + 40);
      cd.offset = Le64(record.data() + 48);
      cd.end = record_at;
    }
  }
  if (!zip64) {
    if (disk != 0 || cd_disk != 0 || disk_entries != cd.entries) {
      return Corrupt("the end record at byte ", end_at,
                     " describes an archive split over several disks");
    }
    if (cd.entries == 0xffff || cd.size == 0xffffffff || cd.offset == 0xffffffff) {
      return Corrupt("the end record at byte ", end_at,
                     " defers to zip64 end records, but no zip64 locator precedes it");
    }
  }
  if (cd.offset > cd.end || cd.size > cd.end - cd.offset) {
    return Corrupt("truncated: the central directory at byte ", cd.offset, " (", cd.size,
                   " bytes) runs past the end records at byte ", cd.end);
  }
  if (cd.size > kMaxCentralDirectoryBytes) {
    return Corrupt("the central directory at byte ", cd.offset, " has ", cd.size,
                   " bytes, more than the ", kMaxCentralDirectoryBytes, " any checkpoint needs");
  }
  if (cd.entries > cd.size / kCentralBytes) {
    return Corrupt("the central directory at byte ", cd.offset, " claims ", cd.entries,
                   " entries, more than its ", cd.size, " bytes can hold");
  }
  return cd;
}

// Fields of a central-directory entry that zip64 may move to an extra field.
struct Sizes {
  uint64_t compressed;
  uint64_t uncompressed;
  uint64_t header_offset;
};

// Replaces each field saturated at 0xffffffff by its 64-bit value from the
// zip64 extra field, in the order the format fixes.
absl::Status ApplyZip64Extra(std::string_view extra, uint64_t entry_at, Sizes* sizes) {
  uint64_t* fields[] = {&sizes->uncompressed, &sizes->compressed, &sizes->header_offset};
  while (extra.size() >= 4) {
    const uint16_t id = Le16(extra.data());
    const uint16_t length = Le16(extra.data() + 2);
    if (length > extra.size() - 4) break;  // Reported below if the field was needed.
    std::string_view data = extra.substr(4, length);
    extra.remove_prefix(4 + length);
    if (id != kZip64ExtraId) continue;
    for (uint64_t* field : fields) {
      if (*field != 0xffffffff) continue;
      if (data.size() < 8) {
        return Corrupt("the central directory entry at byte ", entry_at,
                       " has a zip64 extra field too short for its sizes");
      }
      *field = Le64(data.data());
      data.remove_prefix(8);
    }
    return absl::OkStatus();
  }
  for (uint64_t* field : fields) {
    if (*field == 0xffffffff) {
      return Corrupt("the central directory entry at byte ", entry_at,
                     " defers a size to a zip64 extra field it lacks");
    }
  }
  return absl::OkStatus();
}

// Parses the entry at `*at` in the directory and moves `*at` past it.
absl::StatusOr<ZipEntry> ParseCentralEntry(std::string_view directory, const CentralDirectory& cd,
                                           uint64_t* at) {
  const uint64_t entry_at = cd.offset + *at;
  if (directory.size() - *at < kCentralBytes) {
    return Corrupt("truncated: the central directory entry at byte ", entry_at,
                   " runs past the directory's end at byte ", cd.offset + cd.size);
  }
  const char* p = directory.data() + *at;
  if (Le32(p) != kCentralSignature) {
    return Corrupt("no central directory entry at byte ", entry_at, " (bad signature)");
  }
  const uint16_t flags = Le16(p + 8);
  const uint16_t method = Le16(p + 10);
  Sizes sizes{Le32(p + 20), Le32(p + 24), Le32(p + 42)};
  const uint64_t name_bytes = Le16(p + 28);
  const uint64_t extra_bytes = Le16(p + 30);
  const uint64_t comment_bytes = Le16(p + 32);
  const uint64_t total = kCentralBytes + name_bytes + extra_bytes + comment_bytes;
  if (directory.size() - *at < total) {
    return Corrupt("truncated: the central directory entry at byte ", entry_at, " (", total,
                   " bytes) runs past the directory's end at byte ", cd.offset + cd.size);
  }
  ZipEntry entry;
  entry.name = std::string(directory.substr(*at + kCentralBytes, name_bytes));
  LINSERVE_RETURN_IF_ERROR(ApplyZip64Extra(
      directory.substr(*at + kCentralBytes + name_bytes, extra_bytes), entry_at, &sizes));
  *at += total;
  const std::string shown = Shown(entry.name);
  if (flags & kEncryptedFlag)
    return Corrupt("entry '", shown, "' at byte ", entry_at, " is encrypted");
  if (method != kStoredMethod) {
    return Corrupt("entry '", shown, "' at byte ", entry_at, " is compressed (method ", method,
                   "); torch.save stores entries uncompressed");
  }
  if (sizes.compressed != sizes.uncompressed) {
    return Corrupt("entry '", shown, "' at byte ", entry_at, " is stored but its sizes differ (",
                   sizes.compressed, " and ", sizes.uncompressed, " bytes)");
  }
  entry.header_offset = sizes.header_offset;
  entry.size = sizes.uncompressed;
  return entry;
}

// Finds where the entry's data starts from its local header, checking that
// header and data lie before the central directory.
absl::Status LocateData(const ByteSource& source, const CentralDirectory& cd, ZipEntry* entry) {
  const std::string shown = Shown(entry->name);
  const uint64_t at = entry->header_offset;
  if (at > cd.offset || cd.offset - at < kLocalBytes) {
    return Corrupt("entry '", shown, "': its local header at byte ", at,
                   " does not lie before the central directory at byte ", cd.offset);
  }
  LINSERVE_ASSIGN_OR_RETURN(const std::string header, source.ReadString(at, kLocalBytes));
  if (Le32(header.data()) != kLocalSignature) {
    return Corrupt("entry '", shown, "': no local header at byte ", at, " (bad signature)");
  }
  if (Le16(header.data() + 8) != kStoredMethod) {
    return Corrupt("entry '", shown, "': the local header at byte ", at,
                   " says compressed where the central directory says stored");
  }
  const uint64_t name_bytes = Le16(header.data() + 26);
  const uint64_t extra_bytes = Le16(header.data() + 28);
  const uint64_t data_at = at + kLocalBytes + name_bytes + extra_bytes;
  if (data_at > cd.offset || cd.offset - data_at < entry->size) {
    return Corrupt("truncated: entry '", shown, "' needs bytes [", data_at, ", ", data_at, " + ",
                   entry->size, ") but its data must end by the central directory at byte ",
                   cd.offset);
  }
  LINSERVE_ASSIGN_OR_RETURN(const std::string name,
                            source.ReadString(at + kLocalBytes, name_bytes));
  if (name != entry->name) {
    return Corrupt("entry '", shown, "': the local header at byte ", at, " names '", Shown(name),
                   "' instead");
  }
  entry->data_offset = data_at;
  return absl::OkStatus();
}

// Overlapping entries would let a small file describe unbounded data.
absl::Status CheckDisjoint(const std::vector<ZipEntry>& entries) {
  std::vector<const ZipEntry*> by_offset;
  by_offset.reserve(entries.size());
  for (const ZipEntry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const ZipEntry* a, const ZipEntry* b) {
    return a->header_offset < b->header_offset;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const ZipEntry& a = *by_offset[i - 1];
    const ZipEntry& b = *by_offset[i];
    if (b.header_offset < a.data_offset + a.size) {
      return Corrupt("entries '", Shown(a.name), "' (bytes [", a.header_offset, ", ",
                     a.data_offset + a.size, ")) and '", Shown(b.name), "' (from byte ",
                     b.header_offset, ") overlap");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ZipEntry>> ReadZipDirectory(const ByteSource& source) {
  LINSERVE_ASSIGN_OR_RETURN(const CentralDirectory cd, ReadEndRecords(source));
  LINSERVE_ASSIGN_OR_RETURN(const std::string directory, source.ReadString(cd.offset, cd.size));
  std::vector<ZipEntry> entries;
  entries.reserve(cd.entries);  // Bounded by the directory's size above.
  absl::flat_hash_set<std::string_view> names;
  uint64_t at = 0;
  for (uint64_t i = 0; i < cd.entries; ++i) {
    LINSERVE_ASSIGN_OR_RETURN(ZipEntry entry, ParseCentralEntry(directory, cd, &at));
    LINSERVE_RETURN_IF_ERROR(LocateData(source, cd, &entry));
    entries.push_back(std::move(entry));
  }
  for (const ZipEntry& e : entries) {
    if (!names.insert(e.name).second) {
      return Corrupt("the archive holds entry '", Shown(e.name), "' twice");
    }
  }
  LINSERVE_RETURN_IF_ERROR(CheckDisjoint(entries));
  return entries;
}

}  // namespace linserve
