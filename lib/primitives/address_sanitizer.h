// MAGPIE_ADDRESS_SANITIZED is 1 in a build under AddressSanitizer, by either compiler:
// GCC says so with __SANITIZE_ADDRESS__, clang 14 only through __has_feature.
// Memory magpie keeps for reuse (the task pool, the coroutine frame cache) is then
// poisoned or handed back, so that a use after free is reported.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define MAGPIE_ADDRESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MAGPIE_ADDRESS_SANITIZED 1
#endif
#endif
#ifndef MAGPIE_ADDRESS_SANITIZED
#define MAGPIE_ADDRESS_SANITIZED 0
#endif
