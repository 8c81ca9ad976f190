#!/bin/sh
# The build's C++ compiler with AVX-512 turned off after the cpu backend's -march=native, so that
# generated kernels take their AVX2 code paths on a machine that has AVX-512 (KILN_CXX).
exec "${KILN_TEST_HOST_CXX:-c++}" "$@" -mno-avx512f
