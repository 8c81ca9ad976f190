# `kiln run MODEL --debug-dir DIR` writes a bundle that kiln-debug (when built) opens headless.
set(dir ${WORK}/kiln-run-bundle)
file(REMOVE_RECURSE ${dir})
execute_process(COMMAND ${KILN} run ${MODEL} --debug-dir ${dir} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${dir}/bundle.json)
  message(FATAL_ERROR "kiln run --debug-dir failed (${rc}):\n${out}\n${err}")
endif()
if(DEBUGGER AND EXISTS ${DEBUGGER})
  execute_process(COMMAND ${DEBUGGER} --headless --frames 2 ${dir} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kiln-debug could not open the bundle (${rc}):\n${out}\n${err}")
  endif()
endif()
# A kernel past the bundle's table is refused with the table's size (it used to crash the views).
if(DEBUGGER AND EXISTS ${DEBUGGER})
  execute_process(COMMAND ${DEBUGGER} --headless --kernel 7 ${dir} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "--kernel 7: the bundle has 1 kernels")
    message(FATAL_ERROR "kiln-debug --kernel 7 on a 1-kernel bundle gave (${rc}):\n${out}\n${err}")
  endif()
endif()
