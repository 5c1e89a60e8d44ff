/* A module that requires one that is never loaded. */
#include <keel/keel.h>

static const char *const needsmissing_requires[] = {"nosuchmodule", NULL};

KEEL_MODULE(needsmissing, .version = "1.0.0", .dependencies = needsmissing_requires);
