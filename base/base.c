#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>

_Noreturn void base_assert_fail(const char *file, int line, const char *expr)
{
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}
