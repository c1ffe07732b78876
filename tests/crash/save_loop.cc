// linserve-save-loop DIR: saves state files A and B alternately, forever, to
// one session of a DiskStateStore in DIR, through the server's own store
// code, until it is killed. The kill-during-save test kills it at random
// moments and checks what is left.
//
// Prints "ready REMOVED" on stdout once the store is open (REMOVED: the
// temporaries of earlier, killed saves that opening the store removed), then
// "saved N" after its N-th save (A first, so an even N left B).

#include <unistd.h>

#include <cstdio>
#include <string>

#include "server/store/disk_state_store.h"
#include "tests/crash/save_states.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: linserve-save-loop DIR\n");
    return 2;
  }
  const std::string files[2] = {linserve::SaveStateFile('A'), linserve::SaveStateFile('B')};
  auto store = linserve::DiskStateStore::Open(argv[1]);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  std::printf("ready %d\n", (*store)->stale_temp_files_removed());
  std::fflush(stdout);
  for (uint64_t i = 0;; ++i) {
    const absl::Status saved = (*store)->Put(linserve::SaveStateKey(), files[i % 2]);
    if (!saved.ok()) {
      std::fprintf(stderr, "%s\n", saved.ToString().c_str());
      return 1;
    }
    std::printf("saved %llu\n", static_cast<unsigned long long>(i + 1));
    std::fflush(stdout);
  }
}
