/* Whether the test runs under AddressSanitizer + UndefinedBehaviorSanitizer, whose allocator
 * replaces glibc's heap (a test of what glibc's heap does skips itself there). Every test does
 * all its work in both builds: test_expo, which once took a minute under load and did a tenth of
 * its batches sanitized for it, spent that minute in the exposition writer's needless buffer
 * growth (a mapping made and torn down at each render), not in its checks. */
#ifndef DISKPULSE_TEST_SCALE_H
#define DISKPULSE_TEST_SCALE_H

#if defined(__SANITIZE_ADDRESS__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif
#ifndef TEST_SANITIZED
#define TEST_SANITIZED 0
#endif

#endif
