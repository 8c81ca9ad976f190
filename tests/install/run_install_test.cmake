# Installs the build into a scratch prefix, then configures, builds and runs the consumer project
# against it: proves `cmake --install` + find_package(kiln) + kiln::kiln work.
set(work ${BUILD_DIR}/install-test)
file(REMOVE_RECURSE ${work})
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed: ${ARGN}\n${out}\n${err}")
  endif()
  message("${out}")
endfunction()
step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${work}/prefix)
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${work}/build -G Ninja
     -DCMAKE_PREFIX_PATH=${work}/prefix)
step(${CMAKE_COMMAND} --build ${work}/build)
step(${work}/build/consumer)
