#include "bench/bench_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace linserve {

Table::Table(std::vector<std::string> header, size_t left_from) : left_from_(left_from) {
  rows_.push_back(std::move(header));
}

void Table::Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

void Table::Print() const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(widths[i] - row[i].size(), ' ');
      if (i > 0) line += "  ";
      line += i == 0 || i >= left_from_ ? row[i] + pad : pad + row[i];
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::PrintF("  %s\n", line);
  }
  absl::PrintF("\n");
}

std::string Bytes(int64_t bytes) {
  if (bytes < (int64_t{1} << 20)) return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  if (bytes < (int64_t{1} << 30)) return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
  return absl::StrFormat("%.2f GiB", bytes / 1073741824.0);
}

std::string Ratio(double numerator, double denominator) {
  if (denominator <= 0) return "-";
  return absl::StrFormat("%.2fx", numerator / denominator);
}

std::string Rate(double tokens_per_s) { return absl::StrFormat("%.0f", tokens_per_s); }

}  // namespace linserve
