// Evaluates lowered kernels on the host, element by element, exactly as a GPU would run them.
// It checks lowerings against the cpu reference without any GPU (to be written).
#pragma once
