# Plants a pass that includes the runtime, a layer above it, in a scratch tree and runs the
# configure-time layer check on it: the check must refuse it (CTest matches the message).
set(scratch ${SCRATCH_DIR}/layers_fixture)
file(REMOVE_RECURSE ${scratch})
file(WRITE ${scratch}/core/runtime/program.h "#pragma once\n#include \"core/passes/pass.h\"\n")
file(WRITE ${scratch}/core/passes/fold.cpp "#include \"core/passes/pass.h\"\n#include \"core/runtime/program.h\"\n")
include(${SOURCE_DIR}/tools/cmake/layers.cmake)
kiln_check_layers(${scratch})
message(STATUS "layers: the backwards include was not found")
