// A public header exposing a third-party type: the checker must report this line.
#include <curl/curl.h>
#include <vector>
#include <fmt/format.h>
