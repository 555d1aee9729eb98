// A lab file reaching into the model: with the project's own rules the checker must report the
// tokenizer and model lines, and accept the lab and util ones.
#include "inferlab/lab/load_generator.h"
#include "inferlab/util/error.h"
#include "lab/http_client.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "inferlab/model/model.h"
