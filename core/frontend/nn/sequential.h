// kiln::nn sequential (to be written).
#pragma once
