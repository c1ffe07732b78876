#ifndef LINSERVE_BENCH_BENCH_TABLE_H_
#define LINSERVE_BENCH_BENCH_TABLE_H_

// The plain-text tables of the benchmarks and the formats of their cells.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace linserve {

// A plain-text table: numbers right-aligned, the first column and the
// `left_from`th on (notes) left-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header, size_t left_from = SIZE_MAX);
  void Add(std::vector<std::string> row);
  // Prints the rows, indented by two spaces, and an empty line.
  void Print() const;

 private:
  const size_t left_from_;
  std::vector<std::vector<std::string>> rows_;
};

// "260.0 KiB", "8.0 MiB", "1.62 GiB".
std::string Bytes(int64_t bytes);
// "8.07x"; "-" when the denominator is not positive.
std::string Ratio(double numerator, double denominator);
// Tokens per second, no decimals.
std::string Rate(double tokens_per_s);

}  // namespace linserve

#endif  // LINSERVE_BENCH_BENCH_TABLE_H_
