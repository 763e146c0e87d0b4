/*
 * base — the primitives every module shares, one home each (DESIGN.md
 * layout): assertions that stay on in release builds.
 *
 * Threading: everything here is safe from any thread.
 */
#ifndef LARCH_BASE_H
#define LARCH_BASE_H

/* Prints "file:line: assertion failed: expr" to stderr and aborts. */
_Noreturn void base_assert_fail(const char *file, int line, const char *expr);

/* An invariant of the replication and log code: checked in every build
 * (NDEBUG does not remove it), since a broken invariant there loses data
 * silently if the process carries on. */
#define BASE_ASSERT(cond)                                                                    \
    do {                                                                                     \
        if (!(cond))                                                                         \
            base_assert_fail(__FILE__, __LINE__, #cond);                                     \
    } while (0)

#endif
