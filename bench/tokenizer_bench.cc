// linserve-tokenizer-bench: how fast the tokenizers encode, the RWKV World
// vocabulary (greedy longest match over a trie) beside the byte vocabulary,
// on English and on mixed multilingual text; then the Hugging Face tokenizers
// of ../shared/data/tokenizers on qwen35-style/bench.txt, beside the Rust
// `tokenizers` library itself (npm's @anush008/tokenizers, run by node in the
// same run) where --hf_reference_node_path has it. Every figure is the median
// of --repeats runs; 1 MB = 10^6 bytes.
//
//   linserve-tokenizer-bench [--corpus=../shared/data/tinyshakespeare.txt] [--megabytes=10]
//       [--hf_fixtures=../shared/data/tokenizers]
//       [--hf_reference_node_path=build/hf-reference-npm/node_modules]
//       [--hf_large_tokenizer=build/hf-large/tokenizer.json]

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/token_masks.h"
#include "engine/text/hf_tokenizer.h"
#include "engine/text/tokenizer.h"

ABSL_FLAG(std::string, corpus, "../shared/data/tinyshakespeare.txt",
          "English text, repeated up to --megabytes");
ABSL_FLAG(double, megabytes, 10.0, "size of each text encoded, in 10^6 bytes");
ABSL_FLAG(int32_t, repeats, 7, "runs per figure; the median is shown");
ABSL_FLAG(std::string, hf_fixtures, "../shared/data/tokenizers",
          "the Hugging Face tokenizer fixtures; empty or absent: no Hugging Face figures");
ABSL_FLAG(std::string, hf_reference_node_path, "build/hf-reference-npm/node_modules",
          "node_modules holding @anush008/tokenizers (tests/engine/text/hf_reference_check.sh "
          "installs it there); empty or absent: no library figures");
ABSL_FLAG(std::string, hf_large_tokenizer, "build/hf-large/tokenizer.json",
          "a tokenizer.json of Qwen3.5's size (bench/make_large_hf_tokenizer.py writes one): "
          "its load time and memory; absent: skipped");
ABSL_FLAG(std::string, hf_reference_script, "bench/hf_reference_encode.js",
          "the script that times the library");

namespace linserve {
namespace {

// Sentences of everyday prose in many scripts (Latin with diacritics,
// Cyrillic, Greek, CJK, Hangul, Arabic, Hebrew, Devanagari, Thai), with some
// code and emoji, shuffled into a text: what a multilingual service sees.
const char* const kSentences[] = {
    "The weather was mild, so we walked along the river until the bridge.\n",
    "Le marché ouvre à huit heures ; les pêcheurs arrivent déjà avant l'aube.\n",
    "Die Straßenbahn fährt heute nicht, weil über Nacht zu viel Schnee gefallen ist.\n",
    "¿Dónde está la estación? Necesitamos llegar antes de las once y media.\n",
    "A reunião foi adiada para amanhã, às três horas da tarde, na sala azul.\n",
    "Мы долго обсуждали план, но в итоге решили начать всё сначала.\n",
    "Η θάλασσα ήταν ήρεμη και τα παιδιά έπαιζαν στην άμμο όλο το απόγευμα.\n",
    "今天下午我们在图书馆讨论了新的研究计划，大家都提出了很多建议。\n",
    "明日は雨が降るそうなので、傘を忘れないでくださいね。\n",
    "서울의 봄은 짧지만, 벚꽃이 피는 동안에는 공원이 사람들로 가득합니다.\n",
    "ذهبنا إلى السوق القديم واشترينا الخبز والزيتون والتمر.\n",
    "הספרייה נסגרת בשעה שש, אז כדאי להגיע מוקדם.\n",
    "कल सुबह हम पहाड़ों की ओर यात्रा शुरू करेंगे और शाम तक लौट आएँगे।\n",
    "ตลาดน้ำเปิดทุกวันเสาร์และอาทิตย์ตั้งแต่เช้าจนถึงบ่าย\n",
    "Dziś wieczorem zjemy kolację u babci, która upiekła szarlotkę.\n",
    "Bugün hava çok güzel; sahilde yürüyüş yapıp çay içtik.\n",
    "Chúng tôi đã học tiếng Việt được ba tháng và vẫn còn nhiều điều thú vị.\n",
    "for (int i = 0; i < n; ++i) { total += values[i] * weights[i]; }\n",
    "def greet(name: str) -> str:\n    return f\"Hello, {name}! 👋\"\n",
    "Great news 🎉🎉 — the release is out, thanks everyone! 🙏 #opensource\n",
};

std::string MultilingualText(size_t bytes) {
  std::mt19937 rng(20230424);
  const size_t count = sizeof(kSentences) / sizeof(kSentences[0]);
  std::string text;
  text.reserve(bytes + 256);
  while (text.size() < bytes) text += kSentences[rng() % count];
  return text;
}

std::string Repeated(const std::string& seed, size_t bytes) {
  std::string text;
  text.reserve(bytes + seed.size());
  while (text.size() < bytes) text += seed;
  return text;
}

// The hash hf_reference_encode.js prints: h = h * 31 + id, mod 2^32.
uint32_t IdsHash(const std::vector<int64_t>& ids) {
  uint32_t hash = 0;
  for (int64_t id : ids) hash = hash * 31 + static_cast<uint32_t>(id);
  return hash;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Seconds of CPU this thread has used: on a machine shared with other work,
// what the encoding itself costs, whatever else kept the core busy.
double ThreadCpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

struct EncodeFigures {
  double wall_megabytes_per_second;
  double cpu_megabytes_per_second;
  double tokens_per_byte;
};

EncodeFigures MeasureEncode(const Tokenizer& tokenizer, const std::string& text, int repeats) {
  std::vector<double> wall_rates, cpu_rates;
  size_t tokens = 0;
  const double megabytes = static_cast<double>(text.size()) / 1e6;
  for (int r = 0; r < repeats; ++r) {
    const double cpu_start = ThreadCpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int64_t> ids = tokenizer.Encode(text, /*starts_text=*/false);
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    cpu_rates.push_back(megabytes / (ThreadCpuSeconds() - cpu_start));
    wall_rates.push_back(megabytes / seconds.count());
    tokens = ids.size();
  }
  return {Median(wall_rates), Median(cpu_rates),
          static_cast<double>(tokens) / static_cast<double>(text.size())};
}

// The library's MB/s on `text_file` through node, and a hash of its ids
// (IdsHash); negative if it cannot run.
double ReferenceMegabytesPerSecond(const std::string& tokenizer_json, const std::string& text_file,
                                   int repeats, uint32_t* ids_hash) {
  const std::string node_path = absl::GetFlag(FLAGS_hf_reference_node_path);
  if (node_path.empty() || !std::ifstream(node_path + "/@anush008/tokenizers/package.json")) {
    return -1;
  }
  const std::string command =
      absl::StrFormat("NODE_PATH='%s' node '%s' '%s' '%s' %d 2>&1", node_path,
                      absl::GetFlag(FLAGS_hf_reference_script), tokenizer_json, text_file, repeats);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  double mbps = -1;
  char line[512];
  while (fgets(line, sizeof(line), pipe) != nullptr) {
    double value;
    if (sscanf(line, "mbps %lf", &value) == 1) mbps = value;
    if (sscanf(line, "hash %lf", &value) == 1) *ids_hash = static_cast<uint32_t>(value);
  }
  pclose(pipe);
  return mbps;
}

// Load time and encode speed of each Hugging Face fixture on the
// qwen35-style bench text, beside the library's; the gate is the ratio.
void RunHuggingFace(int repeats) {
  const std::string fixtures = absl::GetFlag(FLAGS_hf_fixtures);
  const std::string text_file = fixtures + "/qwen35-style/bench.txt";
  std::ifstream file(text_file, std::ios::binary);
  std::ostringstream text_stream;
  text_stream << file.rdbuf();
  const std::string text = text_stream.str();
  if (fixtures.empty() || text.empty()) {
    absl::PrintF("Hugging Face tokenizers: no %s, skipped\n", text_file);
    return;
  }
  absl::PrintF(
      "\nHugging Face tokenizers on qwen35-style/bench.txt (%.2f MB), one call per encode,\n"
      "one thread; the library: Rust tokenizers 0.22.2 through npm's @anush008/tokenizers\n",
      text.size() / 1e6);
  absl::PrintF("%-14s | %9s | %9s %9s | %9s | %7s | %s\n", "tokenizer", "load ms", "wall",
               "cpu", "library", "ratio", "ids equal");
  for (const char* name : {"qwen35-style", "gpt-2"}) {
    const std::string json = fixtures + "/" + name + "/tokenizer.json";
    std::vector<double> load_ms;
    std::shared_ptr<const HfTokenizer> hf;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      absl::StatusOr<std::shared_ptr<const HfTokenizer>> loaded =
          HfTokenizer::FromFile(json, HfTokenizerOptions());
      const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
      if (!loaded.ok()) {
        absl::PrintF("%s: %s\n", name, std::string(loaded.status().message()));
        return;
      }
      load_ms.push_back(ms.count());
      hf = *std::move(loaded);
    }
    std::vector<double> wall_rates, cpu_rates;
    uint32_t ids_hash = 0;
    const double megabytes = static_cast<double>(text.size()) / 1e6;
    // One warm-up, as the library gets: both fill their caches of pre-tokens.
    (void)hf->Encode(text, HfAddedTokenMode::kRecognized);
    for (int r = 0; r < repeats; ++r) {
      const double cpu_start = ThreadCpuSeconds();
      const auto start = std::chrono::steady_clock::now();
      const absl::StatusOr<std::vector<int64_t>> encoded =
          hf->Encode(text, HfAddedTokenMode::kRecognized);
      const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
      cpu_rates.push_back(megabytes / (ThreadCpuSeconds() - cpu_start));
      wall_rates.push_back(megabytes / seconds.count());
      ids_hash = encoded.ok() ? IdsHash(*encoded) : 0;
    }
    uint32_t reference_hash = 1;
    const double reference = ReferenceMegabytesPerSecond(json, text_file, repeats, &reference_hash);
    const double wall = Median(wall_rates);
    if (reference > 0) {
      absl::PrintF("%-14s | %9.1f | %9.1f %9.1f | %9.2f | %6.1fx | %s\n", name, Median(load_ms),
                   wall, Median(cpu_rates), reference, wall / reference,
                   reference_hash == ids_hash ? "yes" : "NO");
    } else {
      absl::PrintF("%-14s | %9.1f | %9.1f %9.1f | %9s | %7s | %s\n", name, Median(load_ms), wall,
                   Median(cpu_rates), "-", "-", "no library");
    }
  }
  absl::PrintF("Gate: wall-clock ratio >= 5x the library's single-threaded speed.\n");
}

// Resident memory of this process, bytes (/proc/self/statm).
double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  double pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// Load time and the memory a loaded tokenizer keeps, for a vocabulary of
// Qwen3.5's size.
void RunLargeVocabulary(int repeats) {
  const std::string path = absl::GetFlag(FLAGS_hf_large_tokenizer);
  if (path.empty() || !std::ifstream(path)) {
    absl::PrintF("Large vocabulary: no %s (bench/make_large_hf_tokenizer.py), skipped\n", path);
    return;
  }
  std::vector<double> load_ms;
  double kept_bytes = 0;
  size_t ids = 0;
  for (int r = 0; r < repeats; ++r) {
    const double before = ResidentBytes();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::shared_ptr<const HfTokenizer>> loaded =
        HfTokenizer::FromFile(path, HfTokenizerOptions());
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    if (!loaded.ok()) {
      absl::PrintF("%s: %s\n", path, std::string(loaded.status().message()));
      return;
    }
    load_ms.push_back(ms.count());
    if (r == 0) kept_bytes = ResidentBytes() - before;  // later loads reuse freed pages
    ids = static_cast<size_t>((*loaded)->id_end());
  }
  absl::PrintF(
      "Large vocabulary (%zu ids, %s): load %.0f ms (median of %d), resident memory kept "
      "%.0f MB\n",
      ids, path, Median(load_ms), repeats, kept_bytes / 1e6);

  // Structured output over it: the token trie the masks walk, and the first
  // mask of a JSON-object grammar (nothing cached yet).
  absl::StatusOr<std::shared_ptr<const HfTokenizer>> hf =
      HfTokenizer::FromFile(path, HfTokenizerOptions());
  absl::StatusOr<Tokenizer> tokenizer =
      hf.ok() ? Tokenizer::HuggingFace(*hf, {}, (*hf)->id_end()) : hf.status();
  absl::StatusOr<Grammar> grammar = ParseGbnf(R"(root ::= "{" ws pair ("," ws pair)* "}"
pair ::= string ":" ws value ws
value ::= string | number | "true" | "false" | "null" | "[" ws (value ws ("," ws value ws)*)? "]"
string ::= "\"" ([^"\\] | "\\" ["\\/bfnrt])* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \n]{0,4})");
  if (!tokenizer.ok() || !grammar.ok()) {
    absl::PrintF("token masks: %s\n", !tokenizer.ok() ? tokenizer.status().ToString()
                                                      : grammar.status().ToString());
    return;
  }
  const auto trie_start = std::chrono::steady_clock::now();
  const std::shared_ptr<const TokenTrie> trie = TokenTrieOf(*tokenizer);
  const std::chrono::duration<double, std::milli> trie_ms =
      std::chrono::steady_clock::now() - trie_start;
  GrammarTokenMasks masks(trie, *grammar);
  GrammarState state = masks.matcher().Start();
  const auto mask_start = std::chrono::steady_clock::now();
  (void)masks.Allowed(state);
  const std::chrono::duration<double, std::milli> first_ms =
      std::chrono::steady_clock::now() - mask_start;
  (void)masks.matcher().AdvanceAll(state, "{\"");
  const auto string_start = std::chrono::steady_clock::now();
  (void)masks.Allowed(state);
  const std::chrono::duration<double, std::milli> string_ms =
      std::chrono::steady_clock::now() - string_start;
  absl::PrintF(
      "Token masks over it (a JSON-object grammar): token trie %.0f ms; first mask %.1f ms, "
      "first mask inside a string %.1f ms\n",
      trie_ms.count(), first_ms.count(), string_ms.count());
}

int Run() {
  const std::string path = absl::GetFlag(FLAGS_corpus);
  std::ifstream file(path, std::ios::binary);
  std::ostringstream corpus;
  corpus << file.rdbuf();
  if (!file || corpus.str().empty()) {
    std::cerr << "cannot read --corpus=" << path << "\n";
    return 1;
  }
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  const size_t bytes = static_cast<size_t>(std::max(1.0, absl::GetFlag(FLAGS_megabytes) * 1e6));

  std::vector<double> load_ms;
  absl::StatusOr<Tokenizer> world = absl::UnknownError("not loaded");
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    world = Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), 65536);
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    load_ms.push_back(ms.count());
  }
  if (!world.ok()) {
    std::cerr << world.status() << "\n";
    return 1;
  }
  const Tokenizer bytes_tokenizer = Tokenizer::Bytes(256);

  struct Text {
    const char* name;
    std::string text;
  };
  const Text texts[] = {{"English", Repeated(corpus.str(), bytes)},
                        {"multilingual", MultilingualText(bytes)}};
  absl::PrintF(
      "Encode speed, MB/s (median of %d runs; 1 MB = 10^6 bytes): by wall clock, and by\n"
      "the thread's CPU time (what the encoding costs when other work shares the cores)\n",
      repeats);
  absl::PrintF("%-13s %6s | %-19s | %-19s | %s\n", "", "", "rwkv_world", "byte", "rwkv_world");
  absl::PrintF("%-13s %6s | %9s %9s | %9s %9s | %s\n", "text", "MB", "wall", "cpu", "wall", "cpu",
               "tokens/byte");
  for (const Text& t : texts) {
    const EncodeFigures w = MeasureEncode(*world, t.text, repeats);
    const EncodeFigures b = MeasureEncode(bytes_tokenizer, t.text, repeats);
    absl::PrintF("%-13s %6.2f | %9.1f %9.1f | %9.1f %9.1f | %.3f\n", t.name, t.text.size() / 1e6,
                 w.wall_megabytes_per_second, w.cpu_megabytes_per_second,
                 b.wall_megabytes_per_second, b.cpu_megabytes_per_second, w.tokens_per_byte);
  }
  absl::PrintF("World vocabulary load (parse + trie): %.1f ms (median of %d)\n", Median(load_ms),
               repeats);
  RunHuggingFace(repeats);
  RunLargeVocabulary(repeats);
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return linserve::Run();
}
