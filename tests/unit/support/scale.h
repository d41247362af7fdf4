/* How much work a looping test does. Under AddressSanitizer + UndefinedBehaviorSanitizer the
 * same loop runs 5 to 20 times slower (measured: test_expo's 400 batches of 1,000 doubles take
 * 2.5 s plain and up to 60 s sanitized on a busy 2-core machine), so loops that exist to cover
 * many random inputs do a tenth of their work there; the plain build covers them all. */
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

/* n iterations in the plain build, n / 10 (at least 1) under the sanitizers */
static inline int test_scaled(int n)
{
        return TEST_SANITIZED ? (n / 10 > 0 ? n / 10 : 1) : n;
}

#endif
