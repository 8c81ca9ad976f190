// kiln::nn: modules with named parameters and scopes.
#pragma once

#include "core/frontend/nn/attention.h"
#include "core/frontend/nn/layers.h"
#include "core/frontend/nn/module.h"
#include "core/frontend/nn/sequential.h"
