// Whether this test binary was built with AddressSanitizer (scripts/test --sanitize). Assertions on
// timing ratios of microsecond kernels assume an uninstrumented process; under ASan they check less.
#pragma once

namespace kbtest {
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif
}  // namespace kbtest
