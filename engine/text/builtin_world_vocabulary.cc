// The RWKV World vocabulary, embedded at build time. The assembler copies the
// file named by LINSERVE_WORLD_VOCABULARY_PATH (an absolute path that
// engine/CMakeLists.txt defines, with the file as an OBJECT_DEPENDS so that
// editing it rebuilds this object) straight into .rodata: no generated C
// array of a megabyte to compile. ccache declines to cache a source holding
// this directive, so a stale object can never hide a changed file.

#include "engine/text/tokenizer.h"

#ifndef LINSERVE_WORLD_VOCABULARY_PATH
#error "LINSERVE_WORLD_VOCABULARY_PATH must name the vocabulary file"
#endif

// Hidden: the symbols stay inside whatever binary links this object, so the
// references below are plain PC-relative loads, PIE or not.
// clang-format off
__asm__(".pushsection .rodata\n"
        ".global linserve_world_vocabulary_begin\n"
        ".hidden linserve_world_vocabulary_begin\n"
        ".global linserve_world_vocabulary_end\n"
        ".hidden linserve_world_vocabulary_end\n"
        "linserve_world_vocabulary_begin:\n"
        ".incbin \"" LINSERVE_WORLD_VOCABULARY_PATH "\"\n"
        "linserve_world_vocabulary_end:\n"
        ".popsection\n");
// clang-format on

extern "C" {
__attribute__((visibility("hidden"))) extern const char linserve_world_vocabulary_begin[];
__attribute__((visibility("hidden"))) extern const char linserve_world_vocabulary_end[];
}

namespace linserve {

std::string_view Tokenizer::BuiltInWorldVocabulary() {
  return std::string_view(linserve_world_vocabulary_begin,
                          linserve_world_vocabulary_end - linserve_world_vocabulary_begin);
}

}  // namespace linserve
