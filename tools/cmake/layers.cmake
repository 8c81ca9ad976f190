# The layers of libkiln, lowest first. A source in one layer may include its own folder and the
# layers listed before it; an include of a later layer runs back up and fails the configure, naming
# the file, the include and the order. docs/architecture.md ("Layers") says what each layer holds.
set(KILN_LAYERS
  core/support   # errors, logging, the disk cache
  core/ir        # graph, ops and their rules, SymInt, text form
  core/passes    # graph-to-graph passes and their runner
  core/kernel    # kernel IR, lowering, the emitter's dialects
  core/autodiff  # reverse mode and the backward's partition
  backends       # Device, Buffer, Backend and each backend
  core/runtime   # DeviceTensor, execute_op, the interpreter, compile_graph and the program executor
  core/trace     # debug bundles read from the runtime's programs
  core/frontend  # Tensor, dispatch, autograd, nn, optim, compile
  core/onnx      # the ONNX importer, onto the front end
)

function(kiln_check_layers root)
  list(LENGTH KILN_LAYERS count)
  math(EXPR last "${count} - 1")
  foreach(index RANGE ${last})
    list(GET KILN_LAYERS ${index} layer)
    list(SUBLIST KILN_LAYERS ${index} -1 above)  # this layer and the later ones
    list(REMOVE_AT above 0)
    file(GLOB_RECURSE sources "${root}/${layer}/*.h" "${root}/${layer}/*.cpp" "${root}/${layer}/*.def")
    foreach(source ${sources})
      file(STRINGS ${source} includes REGEX "^#include \"")
      foreach(include ${includes})
        foreach(later ${above})
          if(include MATCHES "^#include \"${later}/")
            file(RELATIVE_PATH where ${root} ${source})
            string(REPLACE ";" " < " order "${KILN_LAYERS}")
            message(FATAL_ERROR "layers: ${where} (layer ${layer}) has ${include}, which runs back up "
                                "to ${later}. The layers, lowest first: ${order} "
                                "(tools/cmake/layers.cmake). Move the code down, or pass what it "
                                "needs in from above.")
          endif()
        endforeach()
      endforeach()
    endforeach()
  endforeach()
endfunction()
