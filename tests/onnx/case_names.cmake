# `kiln test-onnx DIR/` names the case after DIR's last component on its PASS and FAIL lines, with
# or without a trailing slash. The failing case is test_abs held to test_neg's expected output.
set(wrong ${WORK}/case-names/test_abs_wrong)
file(REMOVE_RECURSE ${WORK}/case-names)
file(COPY ${DATA}/test_abs/ DESTINATION ${wrong})
file(COPY_FILE ${DATA}/test_neg/test_data_set_0/output_0.pb ${wrong}/test_data_set_0/output_0.pb)
execute_process(COMMAND ${KILN} test-onnx ${DATA}/test_abs/ ${DATA}/test_abs ${wrong}/
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
foreach(line "PASS test_abs\n" "FAIL test_abs_wrong: ")
  string(FIND "${out}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "kiln test-onnx printed no line starting '${line}':\n${out}\n${err}")
  endif()
endforeach()
string(REGEX MATCHALL "PASS test_abs\n" passes "${out}")
list(LENGTH passes n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "expected 'PASS test_abs' for both spellings of the directory:\n${out}\n${err}")
endif()
