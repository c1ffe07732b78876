// linserve-tokenizer-bench: how fast the tokenizers encode, the RWKV World
// vocabulary (greedy longest match over a trie) beside the byte vocabulary,
// on English and on mixed multilingual text. Every figure is the median of
// --repeats runs; 1 MB = 10^6 bytes.
//
//   linserve-tokenizer-bench [--corpus=../shared/data/tinyshakespeare.txt] [--megabytes=10]

#include <algorithm>
#include <chrono>
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
#include "engine/text/tokenizer.h"

ABSL_FLAG(std::string, corpus, "../shared/data/tinyshakespeare.txt",
          "English text, repeated up to --megabytes");
ABSL_FLAG(double, megabytes, 10.0, "size of each text encoded, in 10^6 bytes");
ABSL_FLAG(int32_t, repeats, 7, "runs per figure; the median is shown");

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
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return linserve::Run();
}
