// Layer 1 — what chaos mode is configured with (magpie/chaos.h), apart from chaos mode
// itself, so that scheduler_options can name it without pulling chaos.h into every user.
#pragma once

#include <magpie/detail/language.h>

#include <cstdint>

namespace magpie {

// chaos_options: the seed, and the chance (0..1) that a chaos point injects a delay. Of
// the delays, about half are yields, a third short spins (up to ~2000 pause instructions)
// and the rest sleeps of 1–50 µs. Also spelled chaos::options (magpie/chaos.h).
struct chaos_options {
  // seed picks the generator's sequence: the same seed repeats each thread's choices.
  std::uint64_t seed = 1;
  // rate is the chance, 0 to 1, that a point injects a delay.
  double rate = 0.05;
};

}  // namespace magpie
