// kiln::nn layers (to be written).
#pragma once
