// The extension module inferlab._core, thin over the library: module.cpp binds the engine (through
// the server's in-process routes), the tokenizer and the forward pass; lab.cpp the measurement
// lab's pure functions and the KV-size formula. The Python package (python/inferlab) shapes these
// into the public API; JSON text crosses the boundary where the library speaks JSON.
#pragma once
#include <nanobind/nanobind.h>

namespace inferlab::python {

void bind_lab(nanobind::module_& m);  // lab.cpp

}  // namespace inferlab::python
